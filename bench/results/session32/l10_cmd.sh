#!/usr/bin/env bash
# Session 32, call l10 (H100): correctness after the review fold (is_a_tail, stage_bytes_of): the Hopper GEMM GPU tests
# (dense odd shapes, M tails, forced tiles, 64-row pairs over many calls, clusters, K-split pairs,
# grouped layouts), then memcheck and synccheck of the sanitizer smoke.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/l10; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
say "tests/gpu/test_hopper_gemm.py"
timeout -k 5 $(( $(left) - 150 )) python -m pytest -q -x tests/gpu/test_hopper_gemm.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck; do
  say "$tool"
  timeout -k 5 $(( ($(left) - 5) / 2 )) "$san" --tool $tool --report-api-errors no python -m bench.sanitizer_smoke > $o/$tool.txt 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|diff" $o/$tool.txt | sort | uniq -c | head -8
done
say done
