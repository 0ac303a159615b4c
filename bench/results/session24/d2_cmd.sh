#!/usr/bin/env bash
# Session 24, call d2 (H200): the one-wave medium-M rows where dgemm runs DeepGEMM's own tile
# and still trails it by 4..6% (511x4096x7168 at 128x128, TMA-store epilogue for both;
# 384x4096x8192 at 128x96). Nsight Compute with per-instruction stall sampling (SASS CSVs),
# one launch each, DeepGEMM 54e2261 first; then 1024x5120x8192 (the worst broad row: our
# 192x128 against DeepGEMM's 128x160 pair) without source.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/d2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
say "511x4096x7168"
PROFILE_SOURCE=1 OUT=$o/p511 bash bench/gpu_profile.sh dense 511 4096 7168 heuristic
say "384x4096x8192"
PROFILE_SOURCE=1 OUT=$o/p384 bash bench/gpu_profile.sh dense 384 4096 8192 heuristic
say "1024x5120x8192"
OUT=$o/p1024 bash bench/gpu_profile.sh dense 1024 5120 8192 heuristic 128x160
say done
cd $OUT && tar czf d2.tgz d2 && rm -rf d2
