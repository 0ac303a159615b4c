#!/usr/bin/env bash
# Session 30, call j7 (H100, Nsight Compute): SM cycles (median of 3 launches) of the small-M
# rows that stay below DeepGEMM 54e2261 with autotuning on, the heuristic's 64-row pair against
# DeepGEMM's one-warpgroup 64x64 (bench.kernel_cycles): is the gap cycles or clock?
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/j7; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
say "kernel_cycles small M"
timeout -k 5 $(left) python -m bench.kernel_cycles --launches 3 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 64,7168,2048 --shape 48,9216,4096 \
  --config heuristic --config 64x64x12 --config 64x64x8 --config 128x64 \
  --json $o/cy.json > $o/cy.txt 2>&1
echo "rc $?"; grep -v '^==' $o/cy.txt | tail -30
say done
cd $OUT && tar czf j7.tgz j7 && rm -rf j7
