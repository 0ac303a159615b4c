#!/usr/bin/env bash
# Session 34, call n2 (H100): correctness with odd rings for 64-row chains: the Hopper GEMM
# GPU tests (new: 300 calls of 64x64x13, 64x56x5 and 64x128x3 at 3, 9 and 56 K blocks), then
# memcheck and synccheck of the sanitizer smoke (new: 64x64x13 on its seven dense shapes).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/n2; mkdir -p $o
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
