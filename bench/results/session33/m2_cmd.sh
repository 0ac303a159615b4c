#!/usr/bin/env bash
# Session 33, call m2 (H100): the pipelined chain (kernel m2: one warpgroup, two accumulators,
# every 64-row tile up to 128 columns; the working tree) against session 32's kernel
# (.exp/base) and DeepGEMM 54e2261: per-CTA event clocks (.exp/pipetrace) and SM cycles.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/m2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
for shape in 128,4096,7168 48,9216,4096; do
  timeout -k 5 120 env PYTHONPATH=. python bench/results/session32/trace_probe.py --shape $shape --config "heuristic@$PWD/.exp/pipetrace" --reps 5 >> $o/trace.txt 2>&1
  say "pipetrace $shape rc $?"
done
grep -v Warn $o/trace.txt
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
say "kernel_cycles"
timeout -k 5 $(left) python -m bench.kernel_cycles --launches 5 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 48,9216,4096 --shape 64,7168,2048 \
  --shape 64,4096,16384 --shape 64,32768,512 --shape 128,2112,7168 --shape 16,16384,2048 \
  --config heuristic --config "heuristic@$PWD/.exp/base" --json $o/cy.json > $o/cy.txt 2>&1
echo "rc $?"; grep -v '^==' $o/cy.txt | tail -40
say done
