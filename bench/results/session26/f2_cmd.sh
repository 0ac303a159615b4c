#!/usr/bin/env bash
# Session 26, call f2 (H200): two probes for f1's finding (128x96 trails DeepGEMM's own 128x96
# by 9..13% per K block at 384x4096xK; 128x128 by 2.7%):
#  1. single-CTA tiles rasterised m-fastest in bands of 16 m-blocks (DeepGEMM's grouping when
#     it does not multicast; ours walks bands of 16 n-blocks n-fastest): ignored copy .exp/mband;
#  2. ptxas --register-usage-level=10 (DeepGEMM's JIT flag) through an uncommitted env hook,
#     its own process and cache directory; ratios to DeepGEMM of the same process compared.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/f2; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
shapes="--shape 384,4096,8192 --shape 384,4096,16384 --shape 511,4096,7168 --shape 256,4096,7168
  --shape 1024,5120,8192 --shape 4096,4096,7168 --shape 4096,7168,2048 --shape 2048,2112,7168
  --shape 777,8192,8192"
say "mband"
DGEMM_CACHE_DIR=/tmp/c_base timeout -k 5 240 python -m bench.compare_tiles --rounds 5 $shapes \
  --config heuristic --config heuristic@$root/.exp/mband/csrc --json $o/ct_mband.json > $o/ct_mband.txt 2>&1
echo "rc $?"
say "register-usage-level=10"
DGEMM_CACHE_DIR=/tmp/c_rul DGEMM_EXP_NVRTC_FLAGS=--ptxas-options=--register-usage-level=10 \
  timeout -k 5 $(( 560 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 5 $shapes \
  --config heuristic --config heuristic@$root/.exp/mband/csrc --json $o/ct_rul.json > $o/ct_rul.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct_mband.txt $o/ct_rul.txt | grep -E "^[^ ]*[0-9]x[0-9]|heur|Deep" | sed 's/x cuBLAS.*x DeepGEMM/xDG/' | head -120
say done
cd $OUT && tar czf f2.tgz f2 && rm -rf f2
