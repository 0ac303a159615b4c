#!/usr/bin/env bash
# Session 18, call y8 (H200): main at 74e458c (two accumulator sets, scale slots per lap,
# 120-column candidate): GPU wgrad + training tests (the tail-width test now includes 120x1),
# memcheck, and the published weight-gradient table (`bench_wgrad --rounds 3`, DeepGEMM
# 54e2261 stock timed in the same process).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y8; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu wgrad + training tests"
timeout -k 5 200 python -m pytest -q tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say memcheck
timeout -k 5 90 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env
say table
timeout -k 5 300 python -m bench.bench_wgrad --rounds 3 --json $o/table.json > $o/table.txt 2>&1
echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/table.txt | head -3
say done
cd $OUT && tar czf y8.tgz y8 && rm -rf y8
