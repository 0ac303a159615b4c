#!/usr/bin/env bash
# Session 22, call c4 (H200), on the committed kernel (early scale reads, c3's preA placement
# up to 120 columns and pre2B's at 128 / 136): GPU wgrad + training tests, memcheck, the
# published table (`bench_wgrad --rounds 3`), and the previous main (.exp/base, b12462f)
# before and after it, 2 rounds each.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c4; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "gpu wgrad + training tests"
timeout -k 5 280 python -m pytest -q -x tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck: sanitizer_wgrad"
timeout -k 5 90 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env
run() {  # label, tree, bench_wgrad args
  local label=$1 tree=$2; shift 2
  say "$label"
  (cd $tree && timeout -k 5 150 python -m bench.bench_wgrad "$@" --json $o/$label.json \
    > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run base1 $root/.exp/base --rounds 2
run table $root --rounds 3
run base2 $root/.exp/base --rounds 2
say done
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
