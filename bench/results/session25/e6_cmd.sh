#!/usr/bin/env bash
# Session 25, call e6 (H200): memcheck and synccheck of the sanitizer smoke (three K-split
# tiles included) on the final tree, after e5.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/e6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck"
timeout -k 5 150 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
say "synccheck"
timeout -k 5 120 $san --tool synccheck python -m bench.sanitizer_smoke > $o/synccheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/synccheck.txt
say done
cd $OUT && tar czf e6.tgz e6 && rm -rf e6
