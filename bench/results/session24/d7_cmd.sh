#!/usr/bin/env bash
# Session 24, call d7 (H200): the whole GPU test suite on the final tree (kernel d5, cost model
# d6 with 5.75 clk per column from 6 K blocks on).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/d7; mkdir -p $o
timeout -k 5 560 python -m pytest -q tests/gpu > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
cd $OUT && tar czf d7.tgz d7 && rm -rf d7
