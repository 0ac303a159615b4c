#!/usr/bin/env bash
# Session 24, call d4 (H200): the TMA-store epilogue for 32-column multiples alone, A/B across
# processes (the Python side builds D's map, so the two cannot share one): .exp/lap (d3's lap
# change, checked stores for 32/96/160-wide tiles) and the new tree (both changes), in the order
# lap, new, lap, new, DeepGEMM 54e2261 in every process; shapes whose picks are 32, 96 or 160
# wide, plus 16x2048x4096 (64x16, same code in both) as the control.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/d4; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
shapes="--shape 128,4096,7168 --shape 64,4096,7168 --shape 128,2112,7168 --shape 256,2048,4096
  --shape 384,4096,8192 --shape 511,3072,4096 --shape 1024,1536,7168 --shape 200,51200,5120
  --shape 200,10240,8192 --shape 511,5120,2048 --shape 16,2048,4096"
ct() {  # label, tree
  local label=$1 tree=$2
  say "$label"
  (cd $tree && timeout -k 5 130 python -m bench.compare_tiles --rounds 3 $shapes --config heuristic \
    --json $o/$label.json > $o/$label.txt 2>&1); echo "rc $?"
}
ct lap1 .exp/lap; ct new1 $root; ct lap2 .exp/lap; ct new2 $root
say done
cd $OUT && tar czf d4.tgz d4 && rm -rf d4
