#!/usr/bin/env bash
# Session 13, call q3 (H200): q2's Nsight Compute part again (q2 read bash's own GROUPS
# variable as the group count): contiguous 4 x 8192 rows of 4096x7168, DeepGEMM, 128x256
# single, 128x256 and 128x192 sharing B.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "ncu contiguous"
OUT=$o/ncu NUM_GROUPS=4 timeout -k 5 500 bash bench/gpu_profile.sh contiguous 8192 4096 7168 \
  128x256 128x256/mc2b 128x192/mc2b > $o/ncu.txt 2>&1
echo "rc $?"; cat $o/ncu.txt
say done
cd $OUT && tar czf q3.tgz q3 && rm -rf q3
