#!/usr/bin/env bash
# Session 16, call w2 (H200): w1's kernel with the math warpgroups at 240 registers (producer
# 24), so that 136-wide tiles compute every scale product before the WGMMA wait (SASS: 128 and
# 136 all of them, 152 30 of 76). bench_wgrad with forced tiles, each process timing DeepGEMM
# 54e2261 beside it (compare the per-process ratios).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w2; mkdir -p $o
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
run t136x2b --tile 136x2b
run t128x1 --tile 128x1
run t136x1 --tile 136x1
run t152x2b --tile 152x2b
say done
cd $OUT && tar czf w2.tgz w2 && rm -rf w2
