#!/usr/bin/env bash
# Session 25, call e2 (H200): where does a K-split pair lose its time against its proxy (the
# plain kernel on (M, 2N, K/2), e1 / session 24 d1)? Three builds of the same K-split tiles in
# the same rounds (compare_tiles @csrc): e1's exchange (remote stores, one release arrive per
# thread), `stasync` (st.async with complete_tx on the peer's barrier: no per-thread fence),
# `noxchg` (no exchange at all: wrong sums, timing only), beside the proxies, DeepGEMM 54e2261
# and cuBLAS-blk.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/e2; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "stasync correctness"
DGEMM_CSRC_DIR=$root/.exp/stasync/csrc timeout -k 5 100 python -m pytest -q -x \
  tests/gpu/test_hopper_gemm.py -k "k_split" > $o/tests_stasync.txt 2>&1; echo "rc $?"; tail -1 $o/tests_stasync.txt
say "compare_tiles"
c=""
for t in 128x64/ks2 128x128/ks2 128x48/ks2; do
  c="$c --config $t --config $t@$root/.exp/stasync/csrc --config $t@$root/.exp/noxchg/csrc"
done
timeout -k 5 $(( 590 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 3 \
  --shape 128,4096,7168 --shape 128,8192,3584 --shape 128,4096,4096 --shape 128,8192,2048 \
  --shape 128,7168,16384 --shape 128,14336,8192 --shape 128,2304,16384 --shape 96,4096,7168 \
  --config heuristic --config 128x64 --config 128x128 $c --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/ct.txt | grep -E "^[0-9]|heur|Deep|ks2|^  128x" | sed 's/x cuBLAS.*x DeepGEMM/xDG/' | head -150
say done
cd $OUT && tar czf e2.tgz e2 && rm -rf e2
