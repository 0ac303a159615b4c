#!/usr/bin/env bash
# Session 13, call q2 (H200): why contiguous 128x256 in clusters sharing B ran 0.88x the single
# CTA tile on 4 x 8192 rows of 4096x7168 (q1) while dense clusters sharing B match single CTAs.
# (1) dense at M = 8192 and 32768 (same N, K), 128x256 single vs sharing B; (2) Nsight Compute
# of the contiguous shape: DeepGEMM, 128x256 single, 128x256 sharing B, 128x192 sharing B.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
for m in 8192 32768; do
  say "dense $m"
  timeout -k 5 150 python -m bench.compare_tiles --shape $m,4096,7168 --config 128x256x3 \
    --config 128x256x3/mc2b --config 128x192x4/mc2b --rounds 3 > $o/dense_$m.txt 2>&1
  echo "rc $?"; tail -6 $o/dense_$m.txt
done
say "ncu contiguous"
OUT=$o/ncu NUM_GROUPS=4 timeout -k 5 400 bash bench/gpu_profile.sh contiguous 8192 4096 7168 \
  128x256 128x256/mc2b 128x192/mc2b > $o/ncu.txt 2>&1
echo "rc $?"; cat $o/ncu.txt
say done
cd $OUT && tar czf q2.tgz q2 && rm -rf q2
