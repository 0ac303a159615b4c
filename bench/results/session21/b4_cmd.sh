#!/usr/bin/env bash
# Session 21, call b4 (H200): the published weight-gradient table on the committed kernel
# (`bench_wgrad --rounds 3`, DeepGEMM stock), then a probe of b3's reading (a two-accumulator
# consumer leaves a pair too little producer lead): .exp/oneacc is the committed tree with
# every tile on the one-accumulator loop (DeepGEMM's structure: scales read before the WGMMAs,
# wait_group 0, release, promote; one scale slot per stage), at 136x2b and 136x1.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/b4; mkdir -p $o; root=$PWD
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
run table $root --rounds 3
run oneacc136b $root/.exp/oneacc --rounds 2 --tile 136x2b
run oneacc136 $root/.exp/oneacc --rounds 2 --tile 136x1
say done
cd $OUT && tar czf b4.tgz b4 && rm -rf b4
