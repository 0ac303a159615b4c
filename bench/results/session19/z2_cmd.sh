#!/usr/bin/env bash
# Session 19, call z2 (H200): the committed candidate (240 / 24 registers, two accumulator
# sets up to 136 columns, 136 a heuristic candidate): GPU wgrad + training tests, memcheck on
# the 136-wide two-accumulator tests and on bench.sanitizer_wgrad, the published table
# (`bench_wgrad --rounds 3`), then a diagnosis: the no-promotion ablation (.exp/nopromo,
# wrong results by design) alone and in clusters, `--quick --time-wrong`.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/z2; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "gpu wgrad + training tests"
timeout -k 5 240 python -m pytest -q tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck: 136-wide two-accumulator tests"
timeout -k 5 150 $san --tool memcheck --report-api-errors no python -m pytest -q \
  tests/gpu/test_wgrad_gpu.py -k "two_accumulator and 136" > $o/memcheck136.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY|passed|failed" $o/memcheck136.txt | tail -2
say "memcheck: sanitizer_wgrad"
timeout -k 5 90 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env
run() {  # label, csrc ("" = the tree's), bench_wgrad args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 590 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|FAULT|rror" $o/$label.txt | head -3
}
run table "" --rounds 3
run nopromo128 $root/.exp/nopromo/csrc --quick --time-wrong --tile 128x1
run nopromo128b $root/.exp/nopromo/csrc --quick --time-wrong --tile 128x2b
run main128b "" --quick --tile 128x2b
run main128 "" --quick --tile 128x1
say done
cd $OUT && tar czf z2.tgz z2 && rm -rf z2
