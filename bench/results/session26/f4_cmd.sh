#!/usr/bin/env bash
# Session 26, call f4 (H200): with kernel f3's m-fastest bands the two m-blocks of a 64-row tile
# at M <= 128 that read the same B tile run on adjacent CTAs, as in DeepGEMM's 64x64 at
# 128x4096x7168 (the one DeepSeek-V3 row still below 0.95). compare_tiles of the 64-row tiles,
# the pick and the K-split pair on the small-M shapes, DeepGEMM 54e2261 in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/f4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "compare_tiles"
timeout -k 5 $(( 560 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 5 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 128,2112,7168 --shape 128,7168,16384 \
  --shape 128,7168,2048 --shape 96,4096,7168 --shape 128,4096,16384 --shape 100,8192,6144 \
  --shape 128,2304,16384 \
  --config heuristic --config 64x32 --config 64x48 --config 64x64 --config 64x96 --config 64x128 \
  --config 64x64/mc2b --config 128x64/ks2 --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct.txt | grep -E "^[^ ]*[0-9]x[0-9]|heur|Deep|^  [0-9]" | sed 's/x cuBLAS.*x DeepGEMM/xDG/' | head -120
say done
cd $OUT && tar czf f4.tgz f4 && rm -rf f4
