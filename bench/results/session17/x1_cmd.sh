#!/usr/bin/env bash
# Session 17, call x1 (H200): the weight gradient's K passes (csrc/dgemm/fp8_wgrad.cuh,
# k_pass_blocks). Pass lengths 0 (one pass: the kernel before the change), 16, 32, 64 K blocks,
# each process timing DeepGEMM 54e2261 beside it, one pass again last (order check), 128x2b
# with passes of 32; the GPU wgrad tests (the new pass test, the tail widths) and memcheck.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/x1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu wgrad tests"
timeout -k 5 150 python -m pytest -q tests/gpu/test_wgrad_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck (passes)"
timeout -k 5 120 $san --tool memcheck --report-api-errors no python -m pytest -q \
  tests/gpu/test_wgrad_gpu.py -k "k_passes and 129" > $o/memcheck_pass.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|passed|failed" $o/memcheck_pass.txt | tail -2
wait
. /tmp/dg_env
run() {  # label, bench_wgrad args
  local label=$1; shift
  say "$label"
  timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad --rounds 3 "$@" \
    --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt
}
run p0 --k-pass 0
run p32 --k-pass 32
run p16 --k-pass 16
run p64 --k-pass 64
run p0b --k-pass 0
run p32_2b --k-pass 32 --tile 128x2b
say done
cd $OUT && tar czf x1.tgz x1 && rm -rf x1
