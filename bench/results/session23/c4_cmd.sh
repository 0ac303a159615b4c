#!/usr/bin/env bash
# Session 23, call c4 (H200): a second run of the new wgrad heuristic (c84f304), right after c3 on
# the same (still warm) machine: DeepSeek-V3's table (3 rounds, the second published table) and the broad suite
# (2 rounds).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c4; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, bench_wgrad args
  local label=$1; shift
  say "$label"
  timeout -k 5 150 python -m bench.bench_wgrad "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|part |WRONG|FAULT|rror" $o/$label.txt | head -4
}
run d_table2 --rounds 3
run b_new2 --suite broad --rounds 2
say done
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
