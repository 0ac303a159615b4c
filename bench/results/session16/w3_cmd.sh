#!/usr/bin/env bash
# Session 16, call w3 (H200): w2's tiles back at 232 math / 40 producer registers (w2's 240/24
# changed only register numbering in the 128-wide SASS yet read 0.840 against w1's 0.914: is it
# the machine?). 128x1 first and last, for the call's own spread. Each process times DeepGEMM
# 54e2261 beside dgemm (compare the per-process ratios).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
run() {  # label, args
  local label=$1; shift
  say "$label"
  timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 3 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt
}
run t128x1 --tile 128x1
run t136x2b --tile 136x2b
run t152x2b --tile 152x2b
run t136x2a --tile 136x2a
run t128x1b --tile 128x1
say done
cd $OUT && tar czf w3.tgz w3 && rm -rf w3
