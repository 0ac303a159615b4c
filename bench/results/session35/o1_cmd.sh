#!/usr/bin/env bash
# Session 35, call o1 (H200): 256-row tiles (two 128-row waves per math warpgroup, the plain
# GEMM; DeepGEMM's large-M geometry). First their GPU tests, then compare_tiles on the large-M
# rows that stayed below DeepGEMM with autotuning on (session 34, n4), DeepGEMM and cuBLAS-blk
# in the same rounds; DG_PRINT_CONFIGS shows DeepGEMM's own tile for each.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/o1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
export DGEMM_CACHE_DIR=/tmp/o1cache
( bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err ) &
dg=$!
say "256-row GPU tests"
timeout -k 5 200 python -m pytest -q tests/gpu/test_hopper_gemm.py -k "256 or rows_past" > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
wait $dg; . /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "compare_tiles"
shapes=""
for s in 16384,2112,7168 16384,1536,7168 4096,4096,7168 4096,7168,16384 8192,4096,8192 \
         6144,4096,14336 4096,37888,3584 4096,5120,8192; do shapes="$shapes --shape $s"; done
DG_PRINT_CONFIGS=1 timeout -k 5 $(left) python -m bench.compare_tiles $shapes \
  --config heuristic --config 256x128/mc2a --config 256x128 --config 256x112/mc2a \
  --config 128x192/mc2b --rounds 5 --json $o/compare.json > $o/compare.txt 2>&1
echo "rc $?"; grep -vE "^\s*$" $o/compare.txt | grep -v "^\[" | tail -70
say done
