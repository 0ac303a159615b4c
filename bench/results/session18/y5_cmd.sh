#!/usr/bin/env bash
# Session 18, call y5 (H200): the weight-gradient kernel as committed after y4 (two
# accumulator sets; the scales in one slot per lap, the stage released before the promotion).
# GPU wgrad + training tests, memcheck; the published table (`bench_wgrad --rounds 3`,
# DeepGEMM 54e2261 stock in the same process); 2-CTA probes at 128x2b and 128x2a.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y5; mkdir -p $o
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
run() {  # label, bench_wgrad args
  local label=$1; shift
  say "$label"
  timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad "$@" \
    --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt | head -3
}
run table --rounds 3
run t128x2b --rounds 2 --tile 128x2b
run t128x2a --rounds 2 --tile 128x2a
say done
cd $OUT && tar czf y5.tgz y5 && rm -rf y5
