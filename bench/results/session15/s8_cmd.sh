#!/usr/bin/env bash
# Session 15, call s8 (H200): kernel s8 (s6 with the producer laps only for tiles of <= 64x32 elements, s7;
# the warp-wide producer everywhere). GPU tests of the sm_90a GEMMs, memcheck and synccheck of the sanitizer
# smoke, then issue 12's grouped and dense tables (rotating rounds, DeepGEMM 54e2261 and
# cuBLAS-blk in the same process; grouped with the pick timed twice).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s8; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu tests"
timeout -k 5 170 python -m pytest -q tests/gpu/test_hopper_gemm.py tests/gpu/test_scale_layouts.py \
  tests/gpu/test_validation_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
say "memcheck"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
timeout -k 5 100 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
say "synccheck"
timeout -k 5 60 $san --tool synccheck python -m bench.sanitizer_smoke > $o/synccheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/synccheck.txt
wait
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 590 - (SECONDS - t0) )); }
for suite in deepseek_v3 broad; do
  say "grouped $suite"
  timeout -k 5 $(left) python -m bench.bench_grouped --suite $suite --part all --control \
    --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/g_$suite.txt
done
for suite in deepseek_v3 broad; do
  say "dense $suite"
  timeout -k 5 $(left) python -m bench.bench_gemm --suite $suite --part all \
    --json $o/d_$suite.json > $o/d_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/d_$suite.txt
done
say done
cd $OUT && tar czf s8.tgz s8 && rm -rf s8
