#!/usr/bin/env bash
# Session 13, call q12 (H200): the GPU test files q11's 200 s limit cut (hot path, CUDA graphs).
mkdir -p $OUT/q12; timeout -k 5 280 python -m pytest -q tests/gpu/test_hot_path.py tests/gpu/test_cuda_graphs.py > $OUT/q12/tests.txt 2>&1; echo "rc $?"; tail -3 $OUT/q12/tests.txt
