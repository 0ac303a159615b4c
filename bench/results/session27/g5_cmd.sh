#!/usr/bin/env bash
# Session 27, call g5 (H200): where one chain beats the split-K pair for 64-row tiles. In g4,
# .exp/onewg (warpgroup 0 takes every stage, no hand-over of partial sums) gained 4.5% at
# 64x32768x512 (4 K blocks a tile) and 1.5% at K = 256, and lost 1..2.5% at K >= 1536.
# compare_tiles over short K, the heuristic's pick from the packaged csrc and from .exp/onewg
# in the same rounds, DeepGEMM 54e2261 beside them: the K-block count below which a 64-row
# tile should run one chain.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/g5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 570 - (SECONDS - t0) )); }
say "compare_tiles"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 7 \
  --shape 64,32768,512 --shape 32,32768,512 --shape 64,7168,512 --shape 16,16384,384 \
  --shape 64,2048,256 --shape 48,12288,640 --shape 64,4096,768 --shape 64,8192,1024 \
  --shape 64,16384,1024 --shape 64,7168,2048 --shape 64,24576,1536 \
  --config heuristic --config "heuristic@$PWD/.exp/onewg/csrc" --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct.txt | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'
say done
cd $OUT && tar czf g5.tgz g5 && rm -rf g5
