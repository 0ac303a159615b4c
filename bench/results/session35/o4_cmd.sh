#!/usr/bin/env bash
# Session 35, call o4 (H200): correctness with 256-row tiles: the Hopper GEMM GPU tests
# (new: 256x{64,96,128} at tails, sharing A, 100 calls bitwise), then memcheck and
# synccheck of the sanitizer smoke (new: 256x128 alone and 256x96 sharing A, dense shapes).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/o4; mkdir -p $o
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
