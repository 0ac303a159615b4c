#!/usr/bin/env bash
# Session 16, call w12 (H200): w11 left 128x96 at 22.6 us in the tuner's timer against 13.9 in
# the profiler's, whatever its position (the others +3.5..4 us): the probe adds back-to-back
# bursts timed with events, without the L2 flush between launches.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w12; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "probe"
DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 300 python -m bench.probe_tuner --shape 512,3072,4096 \
  --shape 1024,5120,8192 > $o/probe.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/probe.txt | tail -20
say done
cd $OUT && tar czf w12.tgz w12 && rm -rf w12
