#!/usr/bin/env bash
# Session 17, call x3 (H200): dense M of two 128-row blocks (128 < M <= 256) with large N, the
# broad suite's FIT part only: is a 2-CTA cluster sharing B (the two m-blocks read one B tile)
# faster than the heuristic's single-CTA pick? compare_tiles, DeepGEMM 54e2261 and cuBLAS-blk
# in the same rounds, DeepGEMM's own choice printed (DG_PRINT_CONFIGS=1).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/x3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
say "compare_tiles"
DG_PRINT_CONFIGS=1 timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.compare_tiles \
  --rounds 5 --shape 200,10240,8192 --shape 200,8192,29568 --shape 200,7168,2048 \
  --shape 256,57344,8192 --shape 256,32768,6144 --shape 256,24576,1536 \
  --config heuristic --config 128x128/mc2b --config 128x160/mc2b --config 128x192/mc2b \
  --config 128x256/mc2b --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; grep -vE "GemmDesc|Warn|warn" $o/ct.txt | tail -45
say done
cd $OUT && tar czf x3.tgz x3 && rm -rf x3
