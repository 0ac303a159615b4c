#!/usr/bin/env bash
# Session 29, call i2 (H200): where i1's epilogue cost goes. Same rounds, DeepGEMM 54e2261
# beside: main (heuristic), @stsm (stmatrix x4 into the swizzled chunks: correct results),
# @stsonly (the staging writes, no TMA stores) and @tmaonly (TMA stores of an unwritten buffer):
# the last two time only, their outputs are wrong.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/i2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
say "compare_tiles: epilogue variants"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 \
  --shape 4096,4096,7168 --shape 4096,7168,2048 --shape 4096,5120,8192 --shape 1024,16384,6656 \
  --shape 3000,8192,28672 --shape 4096,2112,7168 --shape 2047,6144,16384 --shape 128,4096,7168 \
  --config heuristic --config "heuristic@$PWD/.exp/stsm/csrc" \
  --config "heuristic@$PWD/.exp/stsonly/csrc" --config "heuristic@$PWD/.exp/tmaonly/csrc" \
  --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
say done
cd $OUT && tar czf i2.tgz i2 && rm -rf i2
