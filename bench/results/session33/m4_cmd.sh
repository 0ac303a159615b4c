#!/usr/bin/env bash
# Session 33, call m4 (H200): issue 12's published tables on kernel m2 (the pipelined chain of
# 64-row tiles up to 128 columns; cost models as in session 31):
# dense and grouped, DeepSeek-V3 and the broad suite, DeepGEMM 54e2261 and cuBLAS-blk in the
# same process, rotating rounds; then the autotuning-on table (DeepSeek-V3 plus session 25's
# six small-M rows, fresh caches). GPU tests: m3.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/m4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 590 - (SECONDS - t0) )); }
for suite in deepseek_v3 broad; do
  say "dense $suite"
  timeout -k 5 $(left) python -m bench.bench_gemm --suite $suite --part all \
    --json $o/d_$suite.json > $o/d_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/d_$suite.txt
done
for suite in broad deepseek_v3; do
  say "grouped $suite"
  timeout -k 5 $(left) python -m bench.bench_grouped --suite $suite --part all \
    --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/g_$suite.txt
done
say "autotuned dense"
DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 $(left) python -m bench.bench_gemm --suite deepseek_v3 --autotune \
  --extra 128,2304,16384 --extra 96,4096,7168 --extra 128,4096,4096 --extra 48,9216,4096 \
  --extra 384,4096,8192 --extra 64,7168,16384 --json $o/auto.json > $o/auto.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/auto.txt
say done
cd $OUT && tar czf m4.tgz m4 && rm -rf m4
