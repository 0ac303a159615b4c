#!/usr/bin/env bash
# Session 28, call h1 (H200): the pipelined chain for 64-row tiles (working tree: warpgroup 0
# issues K block k's WGMMAs into one of two accumulators before it waits for and promotes K
# block k-1, tiles up to 128 columns, every K) against session 27's kernel (.exp/h_base: the
# split-K pair above 8 K blocks, an unpipelined chain at or below), heuristic picks from both
# sources in the same rounds, DeepGEMM 54e2261 beside them. Then 64x64 sharing B (/mc2b) on the
# two M = 128 rows, where 64x64 is DeepGEMM's own tile.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/h1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 580 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
say "compare_tiles: pipelined chain vs session 27"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 7 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 64,7168,2048 --shape 64,4096,7168 \
  --shape 128,2112,7168 --shape 64,2112,7168 --shape 64,24576,1536 --shape 64,32768,512 \
  --shape 16,16384,384 --shape 64,8192,1024 --shape 48,9216,4096 --shape 96,4096,7168 \
  --shape 64,7168,16384 --shape 64,4096,768 \
  --config heuristic --config "heuristic@$PWD/.exp/h_base/csrc" --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
say "compare_tiles: 64x64 sharing B"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 7 \
  --shape 128,4096,7168 --shape 128,4096,4096 \
  --config heuristic --config 64x64/mc2b --config "64x64/mc2b@$PWD/.exp/h_base/csrc" \
  --json $o/mc.json > $o/mc.txt 2>&1
echo "rc $?"; show $o/mc.txt
say done
cd $OUT && tar czf h1.tgz h1 && rm -rf h1
