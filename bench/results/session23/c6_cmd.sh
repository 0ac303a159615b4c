#!/usr/bin/env bash
# Session 23, call c6 (H200): the whole GPU test suite on the final tree (wgrad picks c84f304,
# warm-up 16f3355).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c6; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
timeout -k 5 560 python -m pytest -q tests/gpu > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED|^ERROR" $o/tests.txt | head
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
