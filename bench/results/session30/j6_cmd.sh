#!/usr/bin/env bash
# Session 30, call j6 (H200): the masked layout's tiles. Every masked row of the DeepSeek-V3 and
# broad suites with the pick and 128x128 / 128x160 / 128x192 / 128x256 / 192x128 / 64x192 / 64x128,
# DeepGEMM 54e2261 in the same rounds (j5: the holdout row 8 x 256, 4096x14336 at 0.947 with
# 192x128; session 29's i1 had 128x160 15% faster there).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/j6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
sw=128x128,128x160,128x192,128x256,192x128,64x192,64x128
say "broad masked"
timeout -k 5 $(( $(left) - 120 )) python -m bench.bench_grouped --suite broad --layout masked \
  --sweep $sw --json $o/broad.json > $o/broad.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/broad.txt
say "deepseek_v3 masked"
timeout -k 5 $(left) python -m bench.bench_grouped --suite deepseek_v3 --layout masked \
  --sweep $sw --json $o/ds.json > $o/ds.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/ds.txt
say done
cd $OUT && tar czf j6.tgz j6 && rm -rf j6
