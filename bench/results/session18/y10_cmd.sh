#!/usr/bin/env bash
# Session 18, call y10 (H200): the oldest K block's scales read into registers before waiting
# for its WGMMAs (all of them up to 120 columns, 8 of 16 column pairs at 128), from y9's stall
# samples (46% on the FMULs behind those loads). Working tree; HEAD's kernel in .exp/wt_head.
# GPU wgrad + training tests and memcheck on the working tree; then `bench_wgrad --rounds 2`
# in the order head, new, new, head.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y10; mkdir -p $o; root=$PWD
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
run() {  # label, tree
  local label=$1 tree=$2
  say "$label"
  (cd $tree && timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 2 --json $o/$label.json > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt | head -3
}
run head $root/.exp/wt_head
run new $root
run new_b $root
run head_b $root/.exp/wt_head
say done
cd $OUT && tar czf y10.tgz y10 && rm -rf y10
