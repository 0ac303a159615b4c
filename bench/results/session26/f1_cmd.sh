#!/usr/bin/env bash
# Session 26, call f1 (H200): is the one-wave gap to DeepGEMM 54e2261 at the SAME tile a fixed
# per-call cost or a per-K-block pace? compare_tiles over K at fixed M, N (one wave of tiles):
# time(K) = a + b * K for dgemm and DeepGEMM in the same rounds, cuBLAS-blk beside.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/f1; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "medium M, DeepGEMM's own tiles"
timeout -k 5 250 python -m bench.compare_tiles --rounds 5 \
  --shape 384,4096,2048 --shape 384,4096,4096 --shape 384,4096,8192 --shape 384,4096,16384 \
  --shape 511,4096,2048 --shape 511,4096,7168 --shape 511,4096,16384 \
  --config heuristic --config 128x96 --config 128x128 --json $o/ct_mid.json > $o/ct_mid.txt 2>&1
echo "rc $?"
say "small M"
timeout -k 5 $(( 560 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 5 \
  --shape 128,4096,2048 --shape 128,4096,4096 --shape 128,4096,7168 --shape 128,4096,16384 \
  --config heuristic --config 64x64 --config 128x64/ks2 --json $o/ct_small.json > $o/ct_small.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct_mid.txt $o/ct_small.txt | grep -E "[0-9]x[0-9]|heur|Deep" | sed 's/x cuBLAS.*x DeepGEMM/xDG/' | head -120
say done
cd $OUT && tar czf f1.tgz f1 && rm -rf f1
