#!/usr/bin/env bash
# Session 32, call l9 (H100): session 28's one-round hand-over (h2_one_round_handover.patch,
# applied to this session's tree in .exp/h2wt) priced in cycles: per-CTA event clocks of the
# 64-row pair and SM cycles against DeepGEMM 54e2261, each tree in its own process (the patch
# changes the shared-memory plan, which the other tree's csrc refuses).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/l9; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
root=$PWD
timeout -k 5 $(left) env PYTHONPATH=. python bench/results/session32/trace_probe.py --shape 128,4096,7168 --config "heuristic@$root/.exp/pretrace" --reps 5 >> $o/trace.txt 2>&1
(cd .exp/h2wt && timeout -k 5 $(left) env PYTHONPATH=. python $root/bench/results/session32/trace_probe.py --shape 128,4096,7168 --config "heuristic@$root/.exp/h2wt/csrc_trace" --reps 5 >> $o/trace.txt 2>&1)
grep -v Warn $o/trace.txt | grep -E "x7168|K loop|hand-over|store|lifetime"
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
shapes="--shape 128,4096,7168 --shape 128,4096,4096 --shape 48,9216,4096 --shape 64,7168,2048"
for tree in main h2; do
  say "kernel_cycles $tree"
  dir=$root; [ $tree = h2 ] && dir=$root/.exp/h2wt
  lim=$(left); [ $tree = main ] && lim=$(( lim / 2 ))
  (cd $dir && timeout -k 5 $lim python -m bench.kernel_cycles --launches 5 $shapes \
    --config heuristic > $o/cy_$tree.txt 2>&1; echo "rc $?")
  grep -E "^[0-9]|DeepGEMM |heuristic" $o/cy_$tree.txt
done
say done
