#!/usr/bin/env bash
# Session 18, call y11 (H200): after the review fold (d89c310): the GPU wgrad + training tests
# (with the new two-accumulator cluster / short-ring test), memcheck of that test, and the
# hardened bench/deepgemm_forced.sh (its build, then one forced layout: `bench_wgrad --quick`
# at 128x1 against DeepGEMM forced to 128,128,1,1).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y11; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
(bash bench/deepgemm_forced.sh > /tmp/dgf_env 2> $o/dgf_setup.err; echo "forced build rc $?" > $o/dgf_rc.txt) &
say "gpu wgrad + training tests"
timeout -k 5 240 python -m pytest -q tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck (two-accumulator cluster / short-ring test)"
timeout -k 5 150 $san --tool memcheck --report-api-errors no python -m pytest -q \
  tests/gpu/test_wgrad_gpu.py -k two_accumulator > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|passed|failed" $o/memcheck.txt | tail -2
wait; cat $o/dgf_rc.txt; cat /tmp/dgf_env
. /tmp/dgf_env
say "forced 128x1"
DG_FORCE_LAYOUT=128,128,1,1 timeout -k 5 200 python -m bench.bench_wgrad --quick --tile 128x1 \
  --json $o/forced128.json > $o/forced128.txt 2>&1
echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/forced128.txt | head -3
say done
cd $OUT && tar czf y11.tgz y11 && rm -rf y11
