#!/usr/bin/env bash
# Session 15, call s1 (H200): issue 13's host path h5 (the cached call in C, dgemm/native).
# Builds the C hot path on the GPU host, runs the host-path GPU tests with it (and
# test_hot_path.py again on the Python path), then bench_call in alternating processes:
# DGEMM_NATIVE=0 (the Python path, main's before this change) / 1 / 0 / 1, each with
# DeepGEMM 54e2261 and cuBLAS-blk in the same process; then call_parts on the C path.
# Kernels come prewarmed in .kcache (bench/bench_call_shapes.json).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $o/gpu.txt
(bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err) &
dg=$!
say "native build"
python -c "
import time; t = time.perf_counter()
from dgemm import native; native.load(); print(native.status(), f'{time.perf_counter() - t:.2f} s')" 2>&1 | tee $o/native.txt
say "gpu tests (C path)"
timeout -k 5 200 python -m pytest -q -p no:cacheprovider -rs tests/gpu/test_hot_path.py \
  tests/gpu/test_cuda_graphs.py tests/gpu/test_compat_gpu.py tests/gpu/test_runtime.py \
  tests/gpu/test_scale_layouts.py > $o/tests.txt 2>&1
echo "rc $?"; tail -4 $o/tests.txt
say "gpu hot-path tests (Python path)"
DGEMM_NATIVE=0 timeout -k 5 90 python -m pytest -q -p no:cacheprovider tests/gpu/test_hot_path.py \
  > $o/tests_python_path.txt 2>&1
echo "rc $?"; tail -2 $o/tests_python_path.txt
wait $dg; . /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
export DGEMM_CACHE_DIR=$PWD/.kcache
for run in 1 2; do
  for nat in 0 1; do
    say "bench_call DGEMM_NATIVE=$nat run $run"
    DGEMM_NATIVE=$nat timeout -k 5 100 python -m bench.bench_call --json $o/call_n${nat}_$run.json \
      > $o/call_n${nat}_$run.txt 2>&1
    echo "rc $?"; tail -12 $o/call_n${nat}_$run.txt
  done
done
say "call_parts (C path)"
timeout -k 5 60 python -m bench.call_parts > $o/call_parts.txt 2>&1; cat $o/call_parts.txt
say done
cd $OUT && tar czf s1.tgz s1 && rm -rf s1
