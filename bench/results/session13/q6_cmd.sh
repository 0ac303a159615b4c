#!/usr/bin/env bash
# Session 13, call q6 (H200): kernel q1 + cost model q5 (contiguous clusters sharing B at long
# K) + timing rotation. GPU tests of the sm_90a GEMMs, memcheck of the sanitizer smoke (new:
# contiguous pairs sharing B), then issue 12's grouped tables with DeepGEMM 54e2261 in the same
# process, rounds rotating, the pick timed twice (--control).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu tests"
timeout -k 5 240 python -m pytest -q tests/gpu/test_hopper_gemm.py tests/gpu/test_scale_layouts.py \
  tests/gpu/test_validation_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
say "memcheck"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
timeout -k 5 200 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|tile" $o/memcheck.txt | tail -12
wait
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for suite in deepseek_v3 broad; do
  say "grouped $suite"
  timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_grouped --suite $suite \
    --part all --control --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/g_$suite.txt
done
say done
cd $OUT && tar czf q6.tgz q6 && rm -rf q6
