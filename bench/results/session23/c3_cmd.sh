#!/usr/bin/env bash
# Session 23, call c3 (H200): the new wgrad heuristic (c84f304: no 120, waves over all groups of
# a launch) against the previous one (.exp/base = 5336595, same kernel and bench): DeepSeek-V3's
# table (base 2 rounds, new 3 rounds = the published table, base 2 rounds), then the broad suite
# (new, base; 2 rounds each), then the GPU wgrad tests if time is left.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c3; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, tree, bench_wgrad args
  local label=$1 tree=$2; shift 2
  [ $(( SECONDS - t0 )) -gt 470 ] && { say "skip $label (time)"; return; }
  say "$label"
  (cd $tree && timeout -k 5 150 python -m bench.bench_wgrad "$@" --json $o/$label.json \
    > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|part |WRONG|FAULT|rror" $o/$label.txt | head -4
}
run d_base1 $root/.exp/base --rounds 2
run d_table $root --rounds 3
run d_base2 $root/.exp/base --rounds 2
run b_new $root --suite broad --rounds 2
run b_base $root/.exp/base --suite broad --rounds 2
if [ $(( SECONDS - t0 )) -lt 440 ]; then
  say "gpu wgrad tests"
  timeout -k 5 $(( 580 - (SECONDS - t0) )) python -m pytest -q -x tests/gpu/test_wgrad_gpu.py > $o/tests.txt 2>&1
  echo "rc $?"; tail -2 $o/tests.txt
fi
say done
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
