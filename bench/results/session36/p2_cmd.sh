#!/usr/bin/env bash
# Session 36, call p2 (H200): the raster's band width. Every tile walks bands of 16 blocks
# (scheduler.cuh); DeepGEMM picks 8 or 16 by a footprint formula (8 for e.g. 192x128 on 132
# SMs). compare_tiles A/B of each config against the same config built from .exp/band8 (bands
# of 8 m-blocks, and 8 n-blocks for clusters sharing A), DeepGEMM and cuBLAS-blk in the same
# rounds, on multi-wave rows (where the raster decides what shares L2).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
rm -rf .kcache && tar xzf .kcache.tgz
export DGEMM_CACHE_DIR=$PWD/.kcache
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
b=$PWD/.exp/band8/csrc
shapes=""
for s in 4096,4096,7168 16384,1536,7168 4096,36864,7168 4096,7168,16384 8192,4096,8192 \
         4096,5120,8192 1024,16384,6656 2047,10240,5120 1024,5120,8192 16384,2112,7168; do
  shapes="$shapes --shape $s"; done
say "compare_tiles band 16 vs 8"
timeout -k 5 $(left) python -m bench.compare_tiles $shapes \
  --config heuristic --config heuristic@$b --config 256x128/mc2a --config 256x128/mc2a@$b \
  --config 128x256/mc2b --config 128x256/mc2b@$b --config 192x128 --config 192x128@$b \
  --rounds 5 --json $o/compare.json > $o/compare.txt 2>&1
echo "rc $?"; grep -vE "^\s*$" $o/compare.txt | grep -v "^\[" | sed "s#$b#B8#" | tail -100
say done
