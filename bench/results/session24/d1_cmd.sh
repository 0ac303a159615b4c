#!/usr/bin/env bash
# Session 24, call d1 (H200): is a split of K across a 2-CTA cluster worth building for the
# small-M dense shapes? Proxy: each CTA of such a pair would run the tile over half of K, so
# the body of the split kernel is the existing kernel on (M, 2N, K/2) at the same tile (same
# tiles per SM, same HBM bytes of B, half of A per CTA). Timed beside the real shapes and
# DeepGEMM 54e2261 in the same rounds (compare_tiles); the reduction between the pair is not
# in the proxy.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/d1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "compare_tiles"
timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 3 \
  --shape 128,4096,7168 --shape 128,8192,3584 \
  --shape 64,4096,7168 --shape 64,8192,3584 \
  --shape 64,2112,7168 --shape 64,4224,3584 \
  --shape 128,2112,7168 --shape 128,4224,3584 \
  --shape 64,7168,16384 --shape 64,14336,8192 \
  --shape 128,7168,16384 --shape 128,14336,8192 \
  --config heuristic --config 128x64 --config 64x64 --config 64x32 --config 128x32 \
  --config 64x112 --config 128x128 --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; grep -vE "GemmDesc|Warn|warn" $o/ct.txt | grep -E "^[0-9]|heur|Deep|x[0-9]+ " | head -120
say done
cd $OUT && tar czf d1.tgz d1 && rm -rf d1
