#!/usr/bin/env bash
# Session 13, call q10 (H200): experiment — clusters sharing B walk bands of 16 m-blocks, m
# fastest (DeepGEMM's raster when it shares B), instead of bands of 16 n-blocks: csrc in the
# ignored .exp/mraster (scheduler.cuh's tile_coords only), A/B in the same rounds with DeepGEMM.
# Contiguous (4 x 8192 rows 4096x7168, 8 x 4096 rows 7168x2048) and dense shapes that pick
# 128x256 sharing B.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q10; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
X=$PWD/.exp/mraster
cfg="--config 128x192x4/mc2b --config 128x192x4/mc2b@$X --config 128x256x3/mc2b --config 128x256x3/mc2b@$X --config 128x256x3"
say "contiguous"
timeout -k 5 250 python -m bench.compare_tiles --groups 4 --shape 8192,4096,7168 $cfg \
  --json $o/c4.json > $o/c4.txt 2>&1; echo "rc $?"; grep -vi warn $o/c4.txt | tail -8
timeout -k 5 200 python -m bench.compare_tiles --groups 8 --shape 4096,7168,2048 $cfg \
  --json $o/c8.json > $o/c8.txt 2>&1; echo "rc $?"; grep -vi warn $o/c8.txt | tail -8
say "dense"
timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.compare_tiles --shape 4096,4096,7168 \
  --shape 4096,7168,16384 --shape 8192,4096,7168 --config 128x256x3/mc2b \
  --config 128x256x3/mc2b@$X --config 128x192x4/mc2b --config 128x192x4/mc2b@$X \
  --json $o/d.json > $o/d.txt 2>&1; echo "rc $?"; grep -vi warn $o/d.txt | tail -24
say done
cd $OUT && tar czf q10.tgz q10 && rm -rf q10
