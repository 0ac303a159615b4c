#!/usr/bin/env bash
# Session 13, call q1 (H200): contiguous 2-CTA clusters sharing B (kernel q1). GPU tests of the
# new path first, then every contiguous shape (DeepSeek-V3 and broad) with 128x192 and 128x256
# in clusters sharing B and 128x192 alone swept beside the pick, DeepGEMM 54e2261 in the same
# process.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu tests"
timeout -k 5 200 python -m pytest -q -x tests/gpu/test_hopper_gemm.py -k "sharing_b or cluster_sharing_a or forced_tile_contiguous or contiguous_grouped" > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
wait
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for suite in deepseek_v3 broad; do
  say "$suite"
  timeout -k 5 $(( 570 - (SECONDS - t0) )) python -m bench.bench_grouped --suite $suite \
    --layout contiguous --part all --sweep 128x192/mc2b,128x256/mc2b,128x192 \
    --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/g_$suite.txt
done
say done
cd $OUT && tar czf q1.tgz q1 && rm -rf q1
