#!/usr/bin/env bash
# Session 30, call j4 (H200): the contiguous layout's tiles. Every contiguous row of the
# DeepSeek-V3 and broad suites with the pick and 128x192 / 128x160 / 128x256, each alone and
# sharing B (main's kernel), DeepGEMM 54e2261 in the same rounds: j3 found 128x192 sharing B
# 2.5..4.5% faster than the pick 128x256 on three rows.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/j4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
sw=128x192/mc2b,128x192,128x160/mc2b,128x256,128x256/mc2b
say "broad contiguous"
timeout -k 5 $(( $(left) - 150 )) python -m bench.bench_grouped --suite broad --layout contiguous \
  --sweep $sw --json $o/broad.json > $o/broad.txt 2>&1
echo "rc $?"; grep -E "^contiguous|geomean" $o/broad.txt | head -40
say "deepseek_v3 contiguous"
timeout -k 5 $(left) python -m bench.bench_grouped --suite deepseek_v3 --layout contiguous \
  --sweep $sw --json $o/ds.json > $o/ds.txt 2>&1
echo "rc $?"; grep -E "^contiguous|geomean" $o/ds.txt | head -20
say done
cd $OUT && tar czf j4.tgz j4 && rm -rf j4
