#!/usr/bin/env bash
# Session 20, call a3 (H200): what a deeper ring is worth. a2 read the stage released after
# the scale loads (held through the promotion) 2.8% slower, so the producer's lead may be
# what limits the kernel. The committed kernel at forced widths and stage counts
# (bench_wgrad --tile W --stages S, 24 rows, 2 rounds, DeepGEMM stock): 120 at 5/4/3 stages,
# 128 at 4/3, 96 at 6/4. If 4 -> 5 pays at 120, the 128/136-wide tiles need a smaller D
# staging tile to fit a fifth stage.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/a3; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, bench_wgrad args
  local label=$1; shift
  say "$label"
  timeout -k 5 100 python -m bench.bench_wgrad --rounds 2 "$@" --json $o/$label.json \
    > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run w120s5 --tile 120x1
run w120s4 --tile 120x1 --stages 4
run w120s3 --tile 120x1 --stages 3
run w128s4 --tile 128x1
run w128s3 --tile 128x1 --stages 3
run w96s6 --tile 96x1
run w96s4 --tile 96x1 --stages 4
run w120s5b --tile 120x1
say done
cd $OUT && tar czf a3.tgz a3 && rm -rf a3
