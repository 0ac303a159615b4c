#!/usr/bin/env bash
# Session 18, call y7 (H200): the wgrad reduce epilogue as vector reductions at L2 straight
# from the registers (red.global.add.v2.f32) instead of a staged tile and TMA reductions:
# no 64 KB staging tile, so 6 stages at 128 and 120 columns instead of 4 / 4 (ignored tree
# copy .exp/wt_atomic, on top of 74e458c). GPU wgrad tests + memcheck in that tree; then
# `bench_wgrad --rounds 2` in the order head, atomic, atomic, head; atomic at 5 stages.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y7; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu wgrad tests (atomic tree)"
(cd .exp/wt_atomic && timeout -k 5 200 python -m pytest -q tests/gpu/test_wgrad_gpu.py \
  > $o/tests.txt 2>&1); echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say memcheck
(cd .exp/wt_atomic && timeout -k 5 90 $san --tool memcheck --report-api-errors no \
  python -m bench.sanitizer_wgrad > $o/memcheck.txt 2>&1); echo "rc $?"
grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env
run() {  # label, tree, bench_wgrad args
  local label=$1 tree=$2; shift 2
  say "$label"
  (cd $tree && timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 2 "$@" --json $o/$label.json > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt | head -3
}
run head $root
run atomic $root/.exp/wt_atomic
run atomic_b $root/.exp/wt_atomic
run head_b $root
run atomic_s5_128 $root/.exp/wt_atomic --tile 128x1 --stages 5
say done
cd $OUT && tar czf y7.tgz y7 && rm -rf y7
