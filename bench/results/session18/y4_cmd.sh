#!/usr/bin/env bash
# Session 18, call y4 (H200): two more steps on y3's two-accumulator wgrad kernel.
#  a: the scales get one slot per lap of the ring, so a stage's A and B are released right
#     after its WGMMAs, before the promotion (ignored tree copy .exp/wt_a);
#  b: a + one stream of K blocks over the CTA's tiles (the next tile's first WGMMAs run
#     through the current tile's last promotion and epilogue): the working tree.
# GPU wgrad + training tests, memcheck and synccheck on b; then `bench_wgrad --rounds 2`
# in the order base (HEAD, .exp/wt_base), a, b, b, a, base.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y4; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu wgrad + training tests"
timeout -k 5 200 python -m pytest -q tests/gpu/test_wgrad_gpu.py tests/gpu/test_training_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt; grep -E "^FAILED" $o/tests.txt | head
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck; do
  say "$tool"
  timeout -k 5 90 $san --tool $tool --report-api-errors no python -m bench.sanitizer_wgrad \
    > $o/$tool.txt 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY" $o/$tool.txt
done
wait
. /tmp/dg_env
run() {  # label, tree
  local label=$1 tree=$2
  say "$label"
  (cd $tree && timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 2 --json $o/$label.json > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt | head -3
}
run base $root/.exp/wt_base
run a $root/.exp/wt_a
run b $root
run b_2 $root
run a_2 $root/.exp/wt_a
run base_2 $root/.exp/wt_base
say done
cd $OUT && tar czf y4.tgz y4 && rm -rf y4
