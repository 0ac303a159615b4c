#!/usr/bin/env bash
# Session 22, call c3 (H200): c2 showed early B-scale loads gain at 120 (all pairs early,
# registers to spare) and lose at 128 (14 of 16, at the register limit). Two placements, only
# where they fit: .exp/preA reads all pairs after the issue of the next K block and before the
# wait where 3 accumulator sets + all scales fit (64, 96, 120; 128 and 136 build main's exact
# cubins); .exp/pre2B reads them before the next K block's barrier wait and issue (all at
# <= 120, 6 of 16 at 128, 4 of 17 at 136: no spills). bench_wgrad, 2 rounds, in the order
# main, preA, pre2B, pre2B, preA, main; then forced 96x1 and 64x1 for each tree.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c3; mkdir -p $o; root=$PWD
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
run preA1 $root/.exp/preA --rounds 2
run pre2B1 $root/.exp/pre2B --rounds 2
run pre2B2 $root/.exp/pre2B --rounds 2
run preA2 $root/.exp/preA --rounds 2
run main2 $root --rounds 2
for w in 96 64; do
  run main_$w $root --rounds 2 --tile ${w}x1
  run preA_$w $root/.exp/preA --rounds 2 --tile ${w}x1
  run pre2B_$w $root/.exp/pre2B --rounds 2 --tile ${w}x1
done
say done
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
