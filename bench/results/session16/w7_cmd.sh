#!/usr/bin/env bash
# Session 16, call w7 (H200): main's final weight-gradient kernel (w1's tail-chunk widths, 232/40
# registers): GPU wgrad + training tests (incl. the new tail-width test), memcheck on the
# sanitizer smoke and on the tail-width test, the published bench_wgrad (--rounds 4); then
# issue 12's worst dense rows, DeepGEMM's own pick printed (DG_PRINT_CONFIGS=1) and the cost
# model's top candidates timed beside it (compare_tiles).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w7; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu tests"
timeout -k 5 150 python -m pytest -q tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck"
timeout -k 5 60 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
timeout -k 5 120 $san --tool memcheck --report-api-errors no python -m pytest -q \
  tests/gpu/test_wgrad_gpu.py -k tail > $o/memcheck_tail.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|passed|failed" $o/memcheck_tail.txt | tail -2
wait
. /tmp/dg_env
left() { echo $(( 590 - (SECONDS - t0) )); }
say "bench_wgrad"
timeout -k 5 $(left) python -m bench.bench_wgrad --rounds 4 --json $o/bench_wgrad.json \
  > $o/bench_wgrad.txt 2>&1
echo "rc $?"; grep -E "geomean" $o/bench_wgrad.txt
say "worst dense rows"
DG_PRINT_CONFIGS=1 timeout -k 5 $(left) python -m bench.compare_tiles --rounds 6 \
  --shape 1024,5120,8192 --config heuristic --config 128x160 --config 128x128 \
  --config 128x128/mc2b --config 128x192 --config 128x256/mc2b \
  --json $o/ct_1024.json > $o/ct_1024.txt 2>&1
echo "rc $?"; grep -vE "GemmDesc|Warn|warn" $o/ct_1024.txt | tail -12
DG_PRINT_CONFIGS=1 timeout -k 5 $(left) python -m bench.compare_tiles --rounds 6 \
  --shape 200,51200,5120 --shape 384,4096,8192 --config heuristic --config 128x128 \
  --config 192x64 --config 128x160/mc2b --config 128x96 \
  --json $o/ct_mid.json > $o/ct_mid.txt 2>&1
echo "rc $?"; grep -vE "GemmDesc|Warn|warn" $o/ct_mid.txt | tail -16
say done
cd $OUT && tar czf w7.tgz w7 && rm -rf w7
