#!/usr/bin/env bash
# Session 19, call z1 (H200): two accumulator sets at 136 columns, and clusters again.
# .exp/wt_r240: the kernel with 240 math / 24 producer registers (DeepGEMM's split) and the
# two-accumulator loop up to 152 columns (136: no spill in the K loop, 3 in the tile's tail).
# bench_wgrad --tile at 128x1, 136x1, 136x2b, 136x2a, 128x2b; the committed kernel at its
# heuristic and at 128x1 / 136x2b (old loop) for reference; DeepGEMM stock in every run.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/z1; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, tree, bench_wgrad args
  local label=$1 tree=$2; shift 2
  say "$label"
  (cd $tree && timeout -k 5 $(( 590 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 2 "$@" --json $o/$label.json > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run base $root
run r128 $root/.exp/wt_r240 --tile 128x1
run r136 $root/.exp/wt_r240 --tile 136x1
run r136b $root/.exp/wt_r240 --tile 136x2b
run r136a $root/.exp/wt_r240 --tile 136x2a
run r128b $root/.exp/wt_r240 --tile 128x2b
run m128 $root --tile 128x1
run m136b $root --tile 136x2b
say done
cd $OUT && tar czf z1.tgz z1 && rm -rf z1
