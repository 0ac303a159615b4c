#!/usr/bin/env bash
# Session 23, call c7 (H200): the final tree after the review fold (aef15b4: launch_waves in
# closed form, warm-up cap, bench tile_name): the wgrad, training and CUDA-graph GPU tests, and
# bench_wgrad --quick (dgemm alone) to run the bench's new row fields on a GPU.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c7; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "gpu tests"
timeout -k 5 400 python -m pytest -q tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  tests/gpu/test_cuda_graphs.py > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
say "bench_wgrad --quick --no-deep-gemm"
timeout -k 5 120 python -m bench.bench_wgrad --quick --no-deep-gemm --json $o/quick.json > $o/quick.txt 2>&1
echo "rc $?"; tail -4 $o/quick.txt
say done
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
