#!/usr/bin/env bash
# Session 22, call c1 (H200): why our one-accumulator pair (136x2b, .exp/oneacc = main with
# every tile on the one-accumulator loop) ran at 0.76 of DeepGEMM's same loop, tile and cluster
# at 2112x7168x16384 (session 21 b4). Nsight Compute with per-instruction stall sampling
# (bench/gpu_profile.sh, PROFILE_SOURCE=1) on DeepGEMM (its pick: 128x136, 4 stages, pair
# sharing B), ours one-accumulator 136x2b at 4 and 5 stages, and main's 136x2b and 136x1.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/c1; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "oneacc"
(cd .exp/oneacc && cp -r $root/.anchors . && OUT=$o/oneacc PROFILE_SOURCE=1 \
  bash bench/gpu_profile.sh wgrad 2112 7168 16384 136x2b@4 136x2b@5)
say "main"
OUT=$o/main PROFILE_SOURCE=1 bash bench/gpu_profile.sh wgrad 2112 7168 16384 136x2b@5 136x1
rm -f $o/main/ncu_deep_gemm*      # profiled again there: keep oneacc's copy
say done
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
