#!/usr/bin/env bash
# Session 26, call f6 (H200): correctness of kernel f3 (m-fastest bands for every single-CTA
# tile and K-split pair) and cost model f5: the whole tests/gpu, then memcheck and synccheck
# of the sanitizer smoke.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/f6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "tests/gpu"
timeout -k 5 440 python -m pytest -q tests/gpu > $o/tests.txt 2>&1; echo "rc $?"; tail -3 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck; do
  say "$tool"
  timeout -k 5 $(( 585 - (SECONDS - t0) )) $san --tool $tool --report-api-errors no python -m bench.sanitizer_smoke \
    > $o/$tool.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY" $o/$tool.txt
done
say done
cd $OUT && tar czf f6.tgz f6 && rm -rf f6
