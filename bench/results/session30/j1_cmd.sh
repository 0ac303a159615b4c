#!/usr/bin/env bash
# Session 30, call j1 (H200): warp staging (each math warp stages 16 rows x 64 columns in its
# own 2 KB slice and stores them with 16-byte global stores; the ring gets the freed shared
# memory): 128x256 with 4 stages and 128x192 with 5 against the heuristic's picks (whole-tile
# staging, TMA stores), DeepGEMM 54e2261 in the same rounds; dense and contiguous.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/j1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/'; }
say "compare_tiles dense"
timeout -k 5 $(( $(left) - 150 )) python -m bench.compare_tiles --rounds 5 \
  --shape 4096,4096,7168 --shape 4096,7168,16384 --shape 4096,7168,2048 --shape 4096,5120,8192 \
  --shape 1024,16384,6656 --shape 2047,6144,16384 --shape 8192,4096,8192 --shape 3000,576,7168 \
  --shape 4096,36864,7168 \
  --config heuristic --config 128x256x4/mc2b --config 128x256x4/mc1 --config 128x192x5/mc2b \
  --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
say "compare_tiles contiguous"
for g in "8 1024,6144,16384" "4 8192,4096,7168"; do set -- $g
  timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 --groups $1 --shape $2 \
    --config heuristic --config 128x256x4/mc2b --config 128x192x5/mc2b \
    --json $o/cg$1.json > $o/cg$1.txt 2>&1
  echo "rc $?"; show $o/cg$1.txt
done
say done
cd $OUT && tar czf j1.tgz j1 && rm -rf j1
