#!/usr/bin/env bash
# Session 15, call s9 (H200): the review fold of the C hot path (references owned, the library
# checked and loaded through one descriptor) on the GPU: its build and status, the host-path
# GPU tests, and bench_call once on each path (DeepGEMM and cuBLAS-blk in each process).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s9; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
(bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err) &
dg=$!
python -c "from dgemm import native; native.load(); print(native.status())" 2>&1 | tee $o/native.txt
say "gpu tests"
timeout -k 5 150 python -m pytest -q -p no:cacheprovider -rs tests/gpu/test_hot_path.py \
  tests/gpu/test_cuda_graphs.py tests/gpu/test_compat_gpu.py tests/gpu/test_runtime.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
wait $dg; . /tmp/dg_env
for nat in 1 0; do
  say "bench_call DGEMM_NATIVE=$nat"
  DGEMM_CACHE_DIR=$PWD/.kcache DGEMM_NATIVE=$nat timeout -k 5 100 python -m bench.bench_call \
    --json $o/call_n$nat.json > $o/call_n$nat.txt 2>&1
  echo "rc $?"; tail -9 $o/call_n$nat.txt
done
say done
cd $OUT && tar czf s9.tgz s9 && rm -rf s9
