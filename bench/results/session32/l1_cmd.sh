#!/usr/bin/env bash
# Session 32, call l1 (H100, Nsight Compute): where the 64-row pair's extra ~6% SM cycles against
# DeepGEMM 54e2261's one-warpgroup 64x64x13 go (session 30 j7). Full sections with
# per-instruction stall sampling at 128x4096x7168 and 48x9216x4096 (heuristic pick and DeepGEMM),
# then SM cycles (median of 5 launches) of the pair at 4..12 stages.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/l1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
say "profile 128x4096x7168"
PROFILE_SOURCE=1 OUT=$o/p128 timeout -k 5 $(left) bash bench/gpu_profile.sh dense 128 4096 7168 heuristic
say "profile 48x9216x4096"
PROFILE_SOURCE=1 OUT=$o/p48 timeout -k 5 $(left) bash bench/gpu_profile.sh dense 48 9216 4096 heuristic
say "kernel_cycles stage depth"
timeout -k 5 $(left) python -m bench.kernel_cycles --launches 5 \
  --shape 128,4096,7168 --shape 128,4096,4096 \
  --config 64x64x12 --config 64x64x8 --config 64x64x6 --config 64x64x4 \
  --json $o/cy.json > $o/cy.txt 2>&1
echo "rc $?"; grep -v '^==' $o/cy.txt | tail -20
say done
