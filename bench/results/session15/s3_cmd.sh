#!/usr/bin/env bash
# Session 15, call s3 (H200): why DeepGEMM's 64x64 tile (one math warpgroup) takes 14.0 us at
# 128x4096x7168 and our 64-row tiles 16.5 (split-K) / 16.6 (s2's one-warpgroup probe, ignored
# csrc copy .exp/onewg): Nsight Compute with the per-instruction stall sampling, one launch
# each (as session 14's r5), for the next session to read.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s3; mkdir -p $o
PROFILE_SOURCE=1 OUT=$o timeout -k 5 500 bash bench/gpu_profile.sh dense 128 4096 7168 64x64 heuristic > $o/profile.log 2>&1
echo "rc $?"; tail -30 $o/profile.log
mkdir -p $o/onewg
DGEMM_CSRC_DIR=$PWD/.exp/onewg PROFILE_SOURCE=1 OUT=$o/onewg timeout -k 5 300 bash bench/gpu_profile.sh \
  dense 128 4096 7168 64x64 > $o/onewg/profile.log 2>&1
echo "rc $?"; tail -12 $o/onewg/profile.log
rm -f $o/*.ncu-rep $o/*/*.ncu-rep 2> /dev/null
cd $OUT && tar czf s3.tgz s3 && rm -rf s3
