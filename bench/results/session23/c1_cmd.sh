#!/usr/bin/env bash
# Session 23, call c1 (H200): the one row below 0.95 (24576x1536x4096, 120 wide). Which tile
# and cluster run it fastest on main's loop (forced tiles over the whole table, 2 rounds each,
# main's pick before and after), and Nsight Compute (no source) on it for DeepGEMM (128x152,
# pair sharing B), ours 120x1 (the pick) and 128x1: where each spends its cycles.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c1; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, tree, bench_wgrad args
  local label=$1 tree=$2; shift 2
  say "$label"
  (cd $tree && timeout -k 5 150 python -m bench.bench_wgrad "$@" --json $o/$label.json \
    > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run main1 $root --rounds 2
for t in 128x1 136x1 120x2b 128x2b; do run f$t $root --rounds 2 --tile $t; done
run main2 $root --rounds 2
say "ncu"
OUT=$o/prof bash bench/gpu_profile.sh wgrad 24576 1536 4096 120x1 128x1
say done
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
