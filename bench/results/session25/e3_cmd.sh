#!/usr/bin/env bash
# Session 25, call e3 (H200): the autotuning-on table with kernel e2 (K-split pairs through
# st.async) and the tuner's extra candidate (hopper_fp8.k_split_candidate: the plain GEMM's
# one-wave K-split pair beside the cost model's top 4): the DeepSeek-V3 dense shapes and the
# small-M long-K broad shapes near the line, fresh caches, DeepGEMM 54e2261 and cuBLAS-blk in
# the same rounds. The heuristic's own kernels are SASS-identical to session 24's (checked
# locally), so the heuristic-only tables of d6 stand.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/e3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
export DGEMM_CACHE_DIR=$(mktemp -d)
say "autotuned dense"
timeout -k 5 $(( 590 - (SECONDS - t0) )) python -m bench.bench_gemm --suite deepseek_v3 --autotune \
  --extra 128,2304,16384 --extra 96,4096,7168 --extra 128,4096,4096 --extra 48,9216,4096 \
  --extra 384,4096,8192 --extra 64,7168,16384 --json $o/auto.json > $o/auto.txt 2>&1
echo "rc $?"; grep -E "^\[|ks2|x1[0-9]+x" $o/auto.txt | head -60; tail -8 $o/auto.txt
say done
cd $OUT && tar czf e3.tgz e3 && rm -rf e3
