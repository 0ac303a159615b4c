#!/usr/bin/env bash
# Session 15, call s4 (H200): s2 showed one math warpgroup is not why DeepGEMM's 64x64 wins at
# 128x4096x7168. The two m-blocks of a 128-row M read the same B tiles: 2-CTA clusters
# sharing B (/mc2b) on 64-row tiles were never timed (session 14's r3 timed /mc2a only).
# compare_tiles with DeepGEMM in the same rounds (the onewg copy through its wrapper, which
# allows odd stage counts), then s3's ncu sampling if time is left.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; . /tmp/dg_env
w=.exp/onewg
for shape in 128,4096,7168 128,4096,4096 128,2112,7168 128,7168,2048 96,4096,7168 200,10240,8192; do
  say "mc2b $shape"
  timeout -k 5 100 python $w/run_compare.py --shape $shape --rounds 5 --config heuristic \
    --config 64x64/mc2b --config 64x64x13/mc2b@$w --config 64x32/mc2b --config 64x128/mc2b \
    --config 64x64x13@$w --json $o/mc2b_${shape//,/x}.json > $o/mc2b_${shape//,/x}.txt 2>&1
  echo "rc $?"; tail -8 $o/mc2b_${shape//,/x}.txt
done
say "ncu"
if (( SECONDS - t0 < 300 )); then
  PROFILE_SOURCE=1 OUT=$o/ncu timeout -k 5 240 bash bench/gpu_profile.sh dense 128 4096 7168 \
    64x64 64x64/mc2b > $o/ncu.log 2>&1
  echo "rc $?"; tail -40 $o/ncu.log
fi
say done
cd $OUT && tar czf s4.tgz s4 && rm -rf s4
