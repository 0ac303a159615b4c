#!/usr/bin/env bash
# Session 34, call n3 (H200): the autotuning-on dense table over the whole suite (DeepSeek-V3
# and all 196 broad rows, fit and holdout), DeepGEMM 54e2261 and cuBLAS-blk in the same rounds.
# Kernels were compiled without a GPU on the 2-core CPU machine (NVRTC 13.0: bench_gemm
# --autotune --precompile-only with dgemm.set_num_sms(132)) into .kcache, carried here as
# .kcache.tgz (11 MB), so the
# call only times: every class starts with no decision and is tuned here; the decisions (with
# each candidate's timing) come back in decisions.tgz.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/n3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
rm -rf .kcache && tar xzf .kcache.tgz
export DGEMM_CACHE_DIR=$PWD/.kcache
ls $DGEMM_CACHE_DIR/decisions 2> /dev/null && say "stale decisions" && exit 1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for suite in deepseek_v3 broad; do
  say "autotuned dense $suite"
  timeout -k 5 $(left) python -m bench.bench_gemm --suite $suite --part all --autotune \
    --json $o/auto_$suite.json > $o/auto_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[|autotuned|precompiled" $o/auto_$suite.txt
done
say done
tar czf $o/decisions.tgz -C $DGEMM_CACHE_DIR decisions
cd $OUT && tar czf n3.tgz n3 && rm -rf n3
