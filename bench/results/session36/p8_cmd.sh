#!/usr/bin/env bash
# Session 36, call p8 (H200): the heuristic-only tables on this session's final tree (the
# Hopper kernels' code as in session 33's m4; csrc changed only in the portable kernels, so
# every cache key is new). Dense and grouped, DeepSeek-V3 and the broad suite, DeepGEMM 54e2261
# and cuBLAS-blk in the same process, rotating rounds. Kernels precompiled on the CPU machine
# (bench_gemm / bench_grouped --precompile-only after dgemm.set_num_sms(132)), carried as
# .kcache_h.tgz.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p8; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
rm -rf .kcache_h && tar xzf .kcache_h.tgz
export DGEMM_CACHE_DIR=$PWD/.kcache_h
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for suite in deepseek_v3 broad; do
  say "dense $suite"
  timeout -k 5 $(left) python -m bench.bench_gemm --suite $suite --part all \
    --json $o/d_$suite.json > $o/d_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[|precompiled" $o/d_$suite.txt
done
for suite in deepseek_v3 broad; do
  say "grouped $suite"
  timeout -k 5 $(left) python -m bench.bench_grouped --suite $suite --part all \
    --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[|precompiled" $o/g_$suite.txt
done
say done
cd $OUT && tar czf p8.tgz p8 && rm -rf p8
