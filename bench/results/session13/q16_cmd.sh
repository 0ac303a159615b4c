#!/usr/bin/env bash
# Session 13, call q16 (nvidia-h200-x2, first lent at the end of this session): issue 14's
# two-GPU torchrun run. bench/gpu_verify_t0.sh's ddp mode from the repository root: one
# redis-server (staged by `bash bench/stage_redis.sh .redis`, carried), two ranks train
# bench.train_fp8's small MLP + MoE model with DDP for 100 steps, each rank with its own fresh
# disk tier; rank 0 compiles and publishes, rank 1 should download.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q16; mkdir -p $o
OUT=$o T0_TREE=$PWD T0_BUDGET_S=${T0_BUDGET_S:-240} bash bench/gpu_verify_t0.sh ddp
cd $OUT && tar czf q16.tgz q16 && rm -rf q16
