#!/usr/bin/env bash
# Session 24, call d3 (H200): kernel d3 = the guarded partial lap as one branch / one jump out
# (math warpgroups and the narrow tiles' producer) + the TMA-store epilogue for tiles of 32-column
# multiples (64B-swizzled 32-column boxes). GPU GEMM tests on the new tree, then compare_tiles
# in three processes with DeepGEMM 54e2261 in each: the base tree (HEAD), the lap change alone
# (.exp/lap, with the base csrc via @DIR in the same rounds) and the whole change (new tree).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/d3; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
say "tests"
timeout -k 5 200 python -m pytest -q -x tests/gpu/test_hopper_gemm.py tests/gpu/test_scale_layouts.py \
  > $o/tests.txt 2>&1; echo "rc $?"; tail -3 $o/tests.txt
shapes="--shape 384,4096,8192 --shape 384,4096,14336 --shape 511,3072,4096 --shape 511,6144,4096
  --shape 511,4096,7168 --shape 128,4096,7168 --shape 64,2112,7168 --shape 200,51200,5120
  --shape 1024,1536,7168 --shape 4096,4096,7168 --shape 1024,5120,8192 --shape 256,24576,1536"
ct() {  # label, tree, configs...
  local label=$1 tree=$2; shift 2
  say "$label"
  (cd $tree && timeout -k 5 150 python -m bench.compare_tiles --rounds 3 $shapes "$@" \
    --json $o/$label.json > $o/$label.txt 2>&1); echo "rc $?"
}
ct base .exp/base --config heuristic
ct lap .exp/lap --config heuristic --config heuristic@$root/.exp/base/csrc
ct new $root --config heuristic
say done
cd $OUT && tar czf d3.tgz d3 && rm -rf d3
