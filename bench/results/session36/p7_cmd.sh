#!/usr/bin/env bash
# Session 36, call p7 (H100): the portable kernels after the fold of their shared K-block MMA
# (portable_utils.cuh: mma_k_block, swizzled_chunk); their SASS moved only in instruction
# order. GPU tests of both portable families (forward and weight gradient, DGEMM_FORCE_PORTABLE).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p7; mkdir -p $o
export DGEMM_CACHE_DIR=/tmp/p7cache
nvidia-smi --query-gpu=name --format=csv > $o/gpu.txt 2>&1
timeout -k 5 500 python -m pytest -q tests/gpu/test_portable.py tests/gpu/test_wgrad_gpu.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -4 $o/tests.txt
