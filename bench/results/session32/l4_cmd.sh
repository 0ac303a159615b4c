#!/usr/bin/env bash
# Session 32, call l4 (H100): DeepGEMM 54e2261's per-CTA event clocks (a copy patched by
# dg_trace_patch.py) beside dgemm's (probe .exp/trace, as l3) at 128x4096x7168 and 48x9216x4096,
# in the same process conditions (one launch after a 256 MB L2 flush, 5 launches).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/l4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
rm -rf /tmp/dgt && cp -r /tmp/deepgemm/dg_head /tmp/dgt && python3 bench/results/session32/dg_trace_patch.py /tmp/dgt
export DG_JIT_CACHE_DIR=/tmp/dgt_cache
for s in 128,4096,7168 48,9216,4096; do
  timeout -k 5 $(left) env PYTHONPATH=/tmp/dgt:. python3 bench/results/session32/dg_trace_probe.py --shape $s --reps 5 >> $o/trace.txt 2>&1
  say "dg $s rc $?"
done
tr=$PWD/.exp/trace
for args in "128,4096,7168 64x64x12" "48,9216,4096 heuristic"; do
  set -- $args
  timeout -k 5 $(left) env PYTHONPATH=. python bench/results/session32/trace_probe.py --shape $1 --config "$2@$tr" --reps 5 >> $o/trace.txt 2>&1
  say "dgemm $args rc $?"
done
grep -v Warn $o/trace.txt
say done
