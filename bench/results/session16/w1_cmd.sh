#!/usr/bin/env bash
# Session 16, call w1 (H200): the weight-gradient kernel with DeepGEMM-like widths (BLOCK_N % 32
# != 0: the reduce epilogue's unswizzled tail chunk). bench_wgrad with forced tiles, each
# process timing DeepGEMM 54e2261 beside it (compare the per-process ratios). The first run
# prints DeepGEMM's own picks (DG_PRINT_CONFIGS=1).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w1; mkdir -p $o
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
DG_PRINT_CONFIGS=1 run t152x1 --tile 152x1
run t128x1 --tile 128x1
run t136x1 --tile 136x1
run t152x2b --tile 152x2b
say done
cd $OUT && tar czf w1.tgz w1 && rm -rf w1
