#!/usr/bin/env bash
# Session 33, call m3 (H100): correctness of kernel m2 (the pipelined chain for 64-row tiles
# up to 128 columns): the Hopper GEMM GPU tests (forced 64-row tiles in all layouts, 300 calls
# of 64x{56,128,144,160} at 3, 9 and 56 K blocks, rows past M, clusters), then memcheck and
# synccheck of the sanitizer smoke.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/m3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
say "tests/gpu/test_hopper_gemm.py"
timeout -k 5 $(( $(left) - 170 )) python -m pytest -q -x tests/gpu/test_hopper_gemm.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck; do
  say "$tool"
  timeout -k 5 $(( ($(left) - 5) / 2 )) "$san" --tool $tool --report-api-errors no python -m bench.sanitizer_smoke > $o/$tool.txt 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|diff" $o/$tool.txt | sort | uniq -c | head -8
done
say done
