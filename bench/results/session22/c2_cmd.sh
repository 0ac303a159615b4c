#!/usr/bin/env bash
# Session 22, call c2 (H200): the B scales of the K block being retired are read before its
# WGMMAs are waited for (.exp/pre: as many pairs as keep 220 live registers: all at 120, 14 of
# 16 at 128, 8 of 17 at 136). c1's stall sampling showed the two-accumulator loop ~40% stalled
# on those loads (short_sb on the FMULs right after each LDS). GPU wgrad tests on pre, then
# bench_wgrad A/B (main, pre, pre, main; 2 rounds), pre at 136x2b, and ncu source sampling of
# pre's 136x1 at 2112x7168x16384.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c2; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "tests (pre)"
(cd .exp/pre && timeout -k 5 200 python -m pytest -q -x tests/gpu/test_wgrad_gpu.py > $o/tests.txt 2>&1)
echo "rc $?"; tail -2 $o/tests.txt
run() {  # label, tree, bench_wgrad args
  local label=$1 tree=$2; shift 2
  say "$label"
  (cd $tree && timeout -k 5 150 python -m bench.bench_wgrad "$@" --json $o/$label.json \
    > $o/$label.txt 2>&1)
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run main1 $root --rounds 2
run pre1 $root/.exp/pre --rounds 2
run pre2 $root/.exp/pre --rounds 2
run main2 $root --rounds 2
run pre136b $root/.exp/pre --rounds 2 --tile 136x2b
say "ncu"
(cd .exp/pre && cp -r $root/.anchors . && OUT=$o/ncu PROFILE_SOURCE=1 \
  bash bench/gpu_profile.sh wgrad 2112 7168 16384 136x1)
rm -f $o/ncu/ncu_deep_gemm.sass.csv
say done
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
