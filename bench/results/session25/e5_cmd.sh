#!/usr/bin/env bash
# Session 25, call e5 (H200): the whole GPU test suite on the final tree (after the review
# folds: MBarrier::wait<true>, families without K-split pairs refuse k_split specs).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/e5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "tests/gpu"
timeout -k 5 585 python -m pytest -q tests/gpu > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
say done
cd $OUT && tar czf e5.tgz e5 && rm -rf e5
