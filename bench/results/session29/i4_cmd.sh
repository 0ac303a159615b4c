#!/usr/bin/env bash
# Session 29, call i4 (H200): kernel i3 (working tree: TMA-store epilogue staged with stmatrix,
# which made 192x128 tiles 1.7..2.6% faster in i2/i3 and left 128x256 alone). Does the cost
# model's choice between 192x128 and 128x256 still hold? The broad suite's fit-part rows with
# M >= 1024 that pick either tile, plus DeepSeek-V3's large-M rows, timed at the heuristic's
# pick and both tiles with and without their clusters. DeepGEMM 54e2261 in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/i4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
shapes=""
for s in 1024,16384,6656 1024,3584,18944 1536,7168,2048 2047,28672,4096 2047,10240,5120 \
         2047,151936,5120 4096,57344,8192 4096,16384,6656 4096,5120,2048 4096,4096,1536 \
         4096,36864,7168 6144,24576,1536 8192,16384,2048 8192,2048,4096 8192,4096,8192 \
         1536,8192,6144 6144,6144,4096 8192,14336,4096 16384,2112,7168 3000,10240,8192 \
         4096,24576,1536 4096,7168,16384 4096,4096,7168 4096,7168,2048; do
  shapes="$shapes --shape $s"; done
say "compare_tiles: 192x128 against 128x256"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 $shapes \
  --config heuristic --config 192x128 --config 192x128/mc2a --config 128x256 --config 128x256/mc2b \
  --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
say done
cd $OUT && tar czf i4.tgz i4 && rm -rf i4
