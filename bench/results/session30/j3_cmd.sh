#!/usr/bin/env bash
# Session 30, call j3 (H200): wall time of what j2's cycles ranked. 128x256 without a cluster
# (3 stages, and 4 with warp staging) and sharing B with 4 stages, against the heuristic's picks
# (128x256x3 sharing B where it picks so); contiguous rows also 128x192x4 sharing B.
# 7 rounds, DeepGEMM 54e2261 in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/j3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|^[0-9]+ x |DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/'; }
say "compare_tiles dense"
timeout -k 5 $(( $(left) - 200 )) python -m bench.compare_tiles --rounds 7 \
  --shape 4096,4096,7168 --shape 4096,7168,16384 --shape 8192,4096,8192 --shape 4096,5120,8192 \
  --shape 1024,16384,6656 --shape 4096,16384,6656 --shape 4096,7168,2048 \
  --config heuristic --config 128x256x3/mc1 --config 128x256x4/mc1 --config 128x256x4/mc2b \
  --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
say "compare_tiles contiguous"
for g in "8 1024,6144,16384" "4 8192,4096,7168" "8 4096,4096,7168"; do set -- $g
  timeout -k 5 $(( $(left) - 10 )) python -m bench.compare_tiles --rounds 7 --groups $1 --shape $2 \
    --config heuristic --config 128x256x3/mc1 --config 128x192x4/mc2b --config 128x256x4/mc2b \
    --json $o/cg$1_${2%%,*}.json > $o/cg$1_${2%%,*}.txt 2>&1
  echo "rc $?"; show $o/cg$1_${2%%,*}.txt
done
say done
cd $OUT && tar czf j3.tgz j3 && rm -rf j3
