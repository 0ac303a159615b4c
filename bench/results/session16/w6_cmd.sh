#!/usr/bin/env bash
# Session 16, call w6 (H200): ptxas put the B-scale loads and the scale products between the
# first and second WGMMA of every K block (SASS), so a warpgroup's WGMMAs left the tensor cores
# idle for ~70 issue slots, which is also why w4's turns lost. .exp/v1: a __syncwarp() after the
# commit keeps all four WGMMAs together (SASS checked); .exp/v1t: v1 plus w4's turns (barrier
# IDs computed, not read from a local array: w4's build loaded them from local memory). Main
# first and last; each process times DeepGEMM 54e2261 beside dgemm.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
run() {  # label, csrc, args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 3 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt
}
run main ""
run v1 $PWD/.exp/v1/csrc
run v1t $PWD/.exp/v1t/csrc
run v1t_t136x1 $PWD/.exp/v1t/csrc --tile 136x1
run main_b ""
say done
cd $OUT && tar czf w6.tgz w6 && rm -rf w6
