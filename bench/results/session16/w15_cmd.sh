#!/usr/bin/env bash
# Session 16, call w15 (H200): main's final state, the whole GPU test suite (tests/gpu).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w15; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "tests/gpu"
timeout -k 5 560 python -m pytest -q tests/gpu > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
say done
cd $OUT && tar czf w15.tgz w15 && rm -rf w15
