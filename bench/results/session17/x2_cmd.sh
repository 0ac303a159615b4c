#!/usr/bin/env bash
# Session 17, call x2 (H200): the weight gradient's promotion in two parts (each half of the
# tile's columns its own WGMMA group; half 0 promoted while half 1's WGMMAs run). A/B against
# the kernel before it (.exp/base/csrc, an ignored copy of main's csrc at a25c7c7), each process
# timing DeepGEMM 54e2261 beside it, in the order base, halves, halves, base; 128x2b halves;
# then the GPU wgrad tests and memcheck on the halves kernel.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/x2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu wgrad tests"
timeout -k 5 150 python -m pytest -q tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck"
timeout -k 5 60 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env
run() {  # label, csrc, bench_wgrad args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 3 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt
}
run base $PWD/.exp/base/csrc
run halves ""
run halves_b ""
run base_b $PWD/.exp/base/csrc
run halves_2b "" --tile 128x2b
run halves_96 "" --tile 96x1
say done
cd $OUT && tar czf x2.tgz x2 && rm -rf x2
