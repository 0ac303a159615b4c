#!/usr/bin/env bash
# Session 32, call l3 (H100): per-CTA event clocks of the 64-row pair (probe .exp/trace =
# csrc + trace.patch) at the small-M rows: where the ~1.4k cycles per CTA that l1/l2 measured
# against DeepGEMM 54e2261 go (start, pace or end).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/l3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
tr=$PWD/.exp/trace
for args in "128,4096,7168 64x64x12" "128,4096,4096 64x64x12" "128,4096,4096 64x64x8" "48,9216,4096 heuristic" "64,7168,2048 heuristic"; do
  set -- $args
  timeout -k 5 $(left) env PYTHONPATH=. python bench/results/session32/trace_probe.py --shape $1 --config "$2@$tr" --reps 5 >> $o/trace.txt 2>&1
  say "$args rc $?"
done
cat $o/trace.txt | grep -v Warn
say done
