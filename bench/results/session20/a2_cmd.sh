#!/usr/bin/env bash
# Session 20, call a2 (H200): the two-accumulator retire reads the oldest K block's scales
# before it releases the stage (.exp/sfirst): base's release (a warp sync and an mbarrier
# arrive, memory clobbers) kept the 18 scale loads, and the products that wait on them, behind
# it. Order base, sfirst, sfirst, base; bench_wgrad (24 rows, 2 rounds, DeepGEMM stock), then
# the GPU wgrad tests on sfirst.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/a2; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, csrc ("" = the tree's), bench_wgrad args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 150 python -m bench.bench_wgrad --rounds 2 "$@" \
    --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run base1 ""
run sf1 $root/.exp/sfirst/csrc
run sf2 $root/.exp/sfirst/csrc
run base2 ""
say "gpu wgrad tests on sfirst"
DGEMM_CSRC_DIR=$root/.exp/sfirst/csrc timeout -k 5 200 python -m pytest -q tests/gpu/test_wgrad_gpu.py \
  > $o/tests_sf.txt 2>&1
echo "rc $?"; tail -2 $o/tests_sf.txt; grep -E "^FAILED" $o/tests_sf.txt | head
say done
cd $OUT && tar czf a2.tgz a2 && rm -rf a2
