#!/usr/bin/env bash
# Session 26, call f5 (H200): a cost-model rule for kernel f3 (f4: with m-fastest bands the two
# 64-row m-blocks of M <= 128 read each B tile on adjacent CTAs, and 64x64 beat the pick 128x32
# at N = 4096). The rule "a one-wave grid of 64-row tiles over exactly two m-blocks costs F x
# the model" moves these picks as F falls from 0.85 to 0.7 (DeepSeek-V3 and broad suite, M in
# 65..128); each shape timed at its current pick and at every tile the rule would give it,
# DeepGEMM 54e2261 in the same rounds. 96x4608x3584 is a holdout row.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/f5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "compare_tiles"
timeout -k 5 $(( 560 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 5 \
  --shape 100,3584,18944 --shape 128,2048,768 --shape 128,4096,7168 --shape 128,4096,4096 \
  --shape 96,4608,3584 --shape 128,7168,16384 --shape 96,7168,16384 --shape 128,7168,18432 \
  --config heuristic --config 64x32 --config 64x56 --config 64x64 --config 64x72 --config 64x112 \
  --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct.txt | grep -E "^[^ ]*[0-9]x[0-9]|heur|Deep|^  [0-9]" | sed 's/x cuBLAS.*x DeepGEMM/xDG/' | head -120
say done
cd $OUT && tar czf f5.tgz f5 && rm -rf f5
