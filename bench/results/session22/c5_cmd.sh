#!/usr/bin/env bash
# Session 22, call c5 (H200): the committed kernel again (c4 read 1.037 with one row at 0.943):
# a second published-table run (`bench_wgrad --rounds 3`), then forced 96x1 and 64x1 (2 rounds;
# c3's preA read 0.931 and 0.880 there, main 0.872 and 0.795).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c5; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, bench_wgrad args
  local label=$1; shift
  say "$label"
  timeout -k 5 150 python -m bench.bench_wgrad "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run table2 --rounds 3
run f96 --rounds 2 --tile 96x1
run f64 --rounds 2 --tile 64x1
say done
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
