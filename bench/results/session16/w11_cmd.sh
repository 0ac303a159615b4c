#!/usr/bin/env bash
# Session 16, call w11 (H200): w10's probe after the tuner's timer fix (method 4: an untimed
# launch after each round's spin, rounds rotating the candidates), then the GPU autotune tests.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w11; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "probe"
DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 300 python -m bench.probe_tuner --shape 512,3072,4096 \
  --shape 4096,4096,7168 --shape 1024,5120,8192 > $o/probe.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/probe.txt | tail -20
say "gpu autotune tests"
timeout -k 5 150 python -m pytest -q tests/gpu/test_autotune_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt
say done
cd $OUT && tar czf w11.tgz w11 && rm -rf w11
