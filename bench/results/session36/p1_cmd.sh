#!/usr/bin/env bash
# Session 36, call p1 (H200): SM clock, board power and FLOP per SM clock of dgemm's tiles and
# of DeepGEMM on the rows that stay below DeepGEMM with autotuning on (session 35, o2/o3), each
# implementation run back to back for 1.5 s after the timed rounds (compare_tiles --clocks).
# Question: at the power cap, is the deficit fewer FLOP per clock or a lower clock?
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
export DGEMM_CACHE_DIR=/tmp/p1cache
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
shapes=""
for s in 4096,4096,7168 8192,4096,8192 16384,1536,7168 4096,7168,16384 4096,36864,7168 \
         128,4096,7168; do shapes="$shapes --shape $s"; done
say "compare_tiles --clocks"
DG_PRINT_CONFIGS=1 timeout -k 5 $(left) python -m bench.compare_tiles $shapes \
  --config heuristic --config 256x128/mc2a --config 128x256/mc2b --config 192x128 \
  --rounds 5 --clocks --json $o/compare.json > $o/compare.txt 2>&1
echo "rc $?"; grep -vE "^\s*$" $o/compare.txt | grep -v "^\[" | tail -60
say done
