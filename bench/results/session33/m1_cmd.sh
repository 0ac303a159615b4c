#!/usr/bin/env bash
# Session 33, call m1 (H100): is one chain (warpgroup 0 takes every stage, no hand-over) now
# memory-bound at long K? Per-CTA event clocks of the pair (main) and of one chain
# (.exp/one: kOneChain for every 64-row tile), and SM cycles of both beside DeepGEMM 54e2261.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/m1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
for shape in 128,4096,7168 48,9216,4096; do
  for v in curtrace onetrace; do
    timeout -k 5 $(left) env PYTHONPATH=. python bench/results/session32/trace_probe.py --shape $shape --config "heuristic@$PWD/.exp/$v" --reps 5 >> $o/trace.txt 2>&1
    say "$v $shape rc $?"
  done
done
grep -v Warn $o/trace.txt
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
say "kernel_cycles"
timeout -k 5 $(left) python -m bench.kernel_cycles --launches 5 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 48,9216,4096 --shape 64,7168,2048 \
  --shape 64,4096,16384 \
  --config heuristic --config "heuristic@$PWD/.exp/one" --json $o/cy.json > $o/cy.txt 2>&1
echo "rc $?"; grep -v '^==' $o/cy.txt | tail -30
say done
