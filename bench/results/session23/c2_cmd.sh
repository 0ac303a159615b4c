#!/usr/bin/env bash
# Session 23, call c2 (H200): c1 found 128x1 at 24576x1536 faster than the heuristic's 120 (0.995
# against 0.940 at K = 4096), i.e. the width model (waves x width / 128 x factor) is off for
# today's kernel. Data to refit it on shapes beyond DeepSeek-V3: the new broad weight-gradient
# suite (bench_wgrad --suite broad: 41 fit + 19 held-out rows, other models' layers and
# experts) with the heuristic's picks and forced 128x1, 120x1, 136x1 and 96x1, 2 rounds each;
# then DeepSeek-V3's table forced to 120x1 if time is left.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c2; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, bench_wgrad args
  local label=$1; shift
  [ $(( SECONDS - t0 )) -gt 500 ] && { say "skip $label (time)"; return; }
  say "$label"
  timeout -k 5 150 python -m bench.bench_wgrad "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|part |WRONG|FAULT|rror" $o/$label.txt | head -4
}
run b_main --suite broad --rounds 2
for t in 128x1 120x1 136x1 96x1; do run b_f$t --suite broad --rounds 2 --tile $t; done
run d_f120x1 --rounds 2 --tile 120x1
say done
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
