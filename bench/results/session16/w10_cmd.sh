#!/usr/bin/env bash
# Session 16, call w10 (H200): the autotuner's timer against the benchmarks' profiler timer on the
# same candidates and inputs (bench/probe_tuner.py), for w8's two disagreements (M<=512 N=3072
# K=4096: tuned 128x128, 12% slower than the heuristic's 128x96 in w9; 4096x4096x7168).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w10; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "probe"
DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 300 python -m bench.probe_tuner --shape 512,3072,4096 \
  --shape 4096,4096,7168 --shape 1024,5120,8192 > $o/probe.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/probe.txt | tail -20
say done
cd $OUT && tar czf w10.tgz w10 && rm -rf w10
