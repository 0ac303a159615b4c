#!/usr/bin/env bash
# Session 19, call z3 (H200): the forward kernel (fp8_gemm.cuh) with the wgrad kernel's register
# split (z1): producer 40 -> 32, math 232 -> 240 (two math warpgroups) and 152 -> 160 (three);
# ignored csrc copy .exp/fwd240. Dense DeepSeek-V3 and grouped DeepSeek-V3 shapes, 3 rounds,
# DeepGEMM and cuBLAS-blk in the same process, in the order main, fwd240, fwd240, main (dense).
# First try (producer 32, budgets summing to 65536): dense_f240 hung until the call's limit;
# this is the second (producer 24: 64512, as CUTLASS), each run capped at 150 s.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/z3; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
run() {  # label, csrc ("" = the tree's), bench module, args
  local label=$1 csrc=$2 mod=$3; shift 3
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( t = 590 - (SECONDS - t0), t < 150 ? t : 150 )) python -m bench.$mod \
    "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|^\[|FAULT|rror" $o/$label.txt | head -6
}
run dense_main "" bench_gemm --rounds 3
run dense_f240 $root/.exp/fwd240/csrc bench_gemm --rounds 3
run grouped_f240 $root/.exp/fwd240/csrc bench_grouped --rounds 3
run grouped_main "" bench_grouped --rounds 3
run dense_f240_2 $root/.exp/fwd240/csrc bench_gemm --rounds 3
run dense_main_2 "" bench_gemm --rounds 3
say done
cd $OUT && tar czf z3.tgz z3 && rm -rf z3
