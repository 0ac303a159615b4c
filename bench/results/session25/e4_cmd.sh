#!/usr/bin/env bash
# Session 25, call e4 (H200): GPU tests of the sm_90a GEMMs (K-split pairs included) and the
# autotuner, memcheck and synccheck of the sanitizer smoke (K-split tiles included), on the
# final kernel (e2's st.async exchange).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/e4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "gpu tests"
timeout -k 5 330 python -m pytest -q tests/gpu/test_hopper_gemm.py tests/gpu/test_autotune_gpu.py \
  tests/gpu/test_scale_layouts.py tests/gpu/test_validation_gpu.py tests/gpu/test_cuda_graphs.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck"
timeout -k 5 120 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
say "synccheck"
timeout -k 5 100 $san --tool synccheck python -m bench.sanitizer_smoke > $o/synccheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/synccheck.txt
say done
cd $OUT && tar czf e4.tgz e4 && rm -rf e4
