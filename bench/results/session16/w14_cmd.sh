#!/usr/bin/env bash
# Session 16, call w14 (H200): w13's profiler-timed tuner still has 128x96 (6128 SASS
# instructions: one main-loop copy per B-scale split) at 19.6 us against the bench's 13.9, while
# 128x128 (1856) agrees. Cold code after another kernel? The probe times the first two
# candidates alone (same kernel every launch) and alternating, each after an L2 flush.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w14; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "probe"
DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 300 python -m bench.probe_tuner --shape 512,3072,4096 \
  --shape 1024,5120,8192 --repeats 1 > $o/probe.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/probe.txt | tail -20
say done
cd $OUT && tar czf w14.tgz w14 && rm -rf w14
