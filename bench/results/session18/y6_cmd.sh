#!/usr/bin/env bash
# Session 18, call y6 (H200): the committed two-accumulator wgrad kernel (cd0414b) at other
# widths (104, 112, 120: waves; 96) and at 128 with 3 stages instead of 4 (does pipeline depth
# still matter?), each `bench_wgrad --rounds 2 --tile ...` with DeepGEMM 54e2261 in the same
# process; the heuristic's pick first and last.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "DeepGEMM setup"
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; . /tmp/dg_env
run() {  # label, bench_wgrad args
  local label=$1; shift
  say "$label"
  timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad --rounds 2 "$@" \
    --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt | head -3
}
run pick
run t120 --tile 120x1
run t112 --tile 112x1
run t104 --tile 104x1
run t96 --tile 96x1
run s3 --tile 128x1 --stages 3
run pick_b
say done
cd $OUT && tar czf y6.tgz y6 && rm -rf y6
