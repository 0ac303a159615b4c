#!/usr/bin/env bash
# Session 19, call z4 (H200): z3's grouped reading again (the forward kernel at 24 + 240 / 160
# registers, .exp/fwd240, read +2.7% on contiguous in one run): DeepSeek-V3 grouped shapes in the
# order main, fwd240, fwd240, main, then the broad suite's grouped shapes main, fwd240.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/z4; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
run() {  # label, csrc ("" = the tree's), args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( t = 590 - (SECONDS - t0), t < 170 ? t : 170 )) \
    python -m bench.bench_grouped "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "^\[|FAULT|rror" $o/$label.txt | head -6
}
run main "" --rounds 3
run f240 $root/.exp/fwd240/csrc --rounds 3
run f240_2 $root/.exp/fwd240/csrc --rounds 3
run main_2 "" --rounds 3
run broad_main "" --suite broad
run broad_f240 $root/.exp/fwd240/csrc --suite broad
say done
cd $OUT && tar czf z4.tgz z4 && rm -rf z4
