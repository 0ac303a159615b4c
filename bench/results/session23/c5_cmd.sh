#!/usr/bin/env bash
# Session 23, call c5 (H200): the new wgrad picks (c84f304, group-aware k-grouped tile) and
# warm-up (16f3355) in the training paths: GPU training, CUDA-graph and drop-in tests, memcheck
# on bench.sanitizer_wgrad, and the FP8 model's loss against BF16 (train_fp8 --control).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "gpu training, graph and compat tests"
timeout -k 5 300 python -m pytest -q tests/gpu/test_training_gpu.py tests/gpu/test_cuda_graphs.py \
  tests/gpu/test_compat_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck: sanitizer_wgrad"
timeout -k 5 90 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
say "train_fp8 --control"
timeout -k 5 200 python -m bench.train_fp8 --steps 120 --control --json $o/train.json > $o/train.txt 2>&1
echo "rc $?"; tail -8 $o/train.txt
say done
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
