#!/usr/bin/env bash
# Session 32, call l5 (H100): kernel l5 (early loads: thread 0 issues the first tile's first
# stages right after barrier init) against session 31's kernel (.exp/old): per-CTA event clocks
# (trace_patch.py on each: .exp/trace, .exp/pretrace) and SM cycles beside DeepGEMM 54e2261.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/l5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
for args in "128,4096,7168 heuristic" "48,9216,4096 heuristic"; do
  set -- $args
  for v in trace pretrace; do
    timeout -k 5 $(left) env PYTHONPATH=. python bench/results/session32/trace_probe.py --shape $1 --config "$2@$PWD/.exp/$v" --reps 5 >> $o/trace.txt 2>&1
    say "$v $args rc $?"
  done
done
grep -v Warn $o/trace.txt
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
say "kernel_cycles"
timeout -k 5 $(left) python -m bench.kernel_cycles --launches 5 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 48,9216,4096 --shape 64,7168,2048 \
  --shape 128,2112,7168 --shape 2047,6144,16384 \
  --config heuristic --config "heuristic@$PWD/.exp/old" --json $o/cy.json > $o/cy.txt 2>&1
echo "rc $?"; grep -v '^==' $o/cy.txt | tail -40
say done
