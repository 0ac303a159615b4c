#!/usr/bin/env bash
# Session 16, call w5 (H200): the weight gradient's K loop unrolled by the stage count (as
# DeepGEMM's dense 1D1D kernel), at 232/40 and at 240/24 registers (ignored csrc copies
# .exp/u232, .exp/u240: fp8_wgrad.cuh's `#pragma unroll 1` -> `#pragma unroll kNumStages`, and
# u240 the register split), against main (w3's kernel), main first and last. Each process
# times DeepGEMM 54e2261 beside dgemm (compare the per-process ratios).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w5; mkdir -p $o
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
run u232 $PWD/.exp/u232/csrc
run u240 $PWD/.exp/u240/csrc
run u240_t136x2b $PWD/.exp/u240/csrc --tile 136x2b
run main_b ""
say done
cd $OUT && tar czf w5.tgz w5 && rm -rf w5
