#!/usr/bin/env bash
# Session 21, call b2 (H200): b1's chunk ring (a fifth stage at 128 and 136: +1.1%, but -1..3%
# on the 120-wide rows, whose stage count it did not change) reworked: a tile's chunks use as
# many slots as fit beside the stages, the whole tile where it fits (120: as before), else
# three (128, 136 at 5 stages), the ring reused within a tile only. GPU wgrad + training
# tests, memcheck, bench_wgrad (2 rounds) base, new, new, base (.exp/base = 908d517), then
# probes: 136 and 128 in 2-CTA clusters sharing B (DeepGEMM's pick) now with 5 stages.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/b2; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "gpu wgrad + training tests"
timeout -k 5 200 python -m pytest -q -x tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck: sanitizer_wgrad"
timeout -k 5 90 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
say "memcheck: 136-wide two-accumulator tests"
timeout -k 5 120 $san --tool memcheck --report-api-errors no python -m pytest -q \
  tests/gpu/test_wgrad_gpu.py -k "two_accumulator and 136" > $o/memcheck136.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|passed|failed" $o/memcheck136.txt | tail -2
wait
. /tmp/dg_env
run() {  # label, tree, bench_wgrad args
  local label=$1 tree=$2; shift 2
  say "$label"
  (cd $tree && timeout -k 5 $(( 595 - (SECONDS - t0) )) python -m bench.bench_wgrad --rounds 2 \
    "$@" --json $o/$label.json > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run base $root/.exp/base
run new $root
run new2 $root
run base2 $root/.exp/base
run new136x2b $root --tile 136x2b
run new128x2b $root --tile 128x2b
say done
cd $OUT && tar czf b2.tgz b2 && rm -rf b2
