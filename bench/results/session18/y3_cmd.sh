#!/usr/bin/env bash
# Session 18, call y3 (H200): the weight gradient with two accumulator sets (tiles <= 128
# columns: K block k + 1's WGMMAs run while K block k is promoted), in the working tree.
# GPU wgrad tests and memcheck on it; then `bench_wgrad --rounds 2` A/B against main's kernel
# (.exp/base/csrc) in the order base, new, new, base; new at 96x1, 128x2b, 128x2a; new with
# bands of 8 n-blocks (.exp/new_band8).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu wgrad tests"
timeout -k 5 200 python -m pytest -q tests/gpu/test_wgrad_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck"
timeout -k 5 90 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env
run() {  # label, csrc ("" = the working tree), bench_wgrad args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 2 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt | head -3
}
run base $PWD/.exp/base/csrc
run new ""
run new_b ""
run base_b $PWD/.exp/base/csrc
run new_96 "" --tile 96x1
run new_128x2b "" --tile 128x2b
run new_band8 $PWD/.exp/new_band8/csrc
say done
cd $OUT && tar czf y3.tgz y3 && rm -rf y3
