#!/usr/bin/env bash
# Session 21, call b1 (H200): the reduce epilogue through a ring of 8 KB chunk slots (three
# per warpgroup, two below three chunks; one TMA reduction and bulk group per chunk) instead
# of the whole staged tile, which frees a fifth stage at 128 and 136 columns (and a fourth at
# 160). GPU wgrad + training tests, memcheck (sanitizer_wgrad and the 136-wide tests), then
# bench_wgrad (2 rounds, DeepGEMM stock) in the order base, new, new, base (.exp/base is the
# tree at 908d517), then forced tiles: 128 and 136 at 4 stages (the ring's cost alone), 160.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/b1; mkdir -p $o; root=$PWD
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
run new136s4 $root --tile 136x1 --stages 4
run new128s4 $root --tile 128x1 --stages 4
run new160 $root --tile 160x1
say done
cd $OUT && tar czf b1.tgz b1 && rm -rf b1
