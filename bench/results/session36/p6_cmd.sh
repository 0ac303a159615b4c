#!/usr/bin/env bash
# Session 36, call p6 (H200): session 35 o2 again (third run of the same code, kernels and command): the autotuning-on tables over the whole suite, dense and
# grouped (contiguous and masked), with the 256-row tile as a candidate beside large-M picks and
# the candidates one per tile shape first (hopper_fp8.distinct_shapes_first). Kernels
# precompiled on the CPU machine (bench_gemm and bench_grouped --autotune --precompile-only
# after dgemm.set_num_sms(132), as in session 34) and carried as .kcache.tgz; no decision
# carried: every class is tuned here.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p6; mkdir -p $o
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
for suite in deepseek_v3 broad; do
  say "autotuned grouped $suite"
  timeout -k 5 $(left) python -m bench.bench_grouped --suite $suite --part all --autotune \
    --json $o/gauto_$suite.json > $o/gauto_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[|autotuned|precompiled" $o/gauto_$suite.txt
done
say done
tar czf $o/decisions.tgz -C $DGEMM_CACHE_DIR decisions
cd $OUT && tar czf p6.tgz p6 && rm -rf p6
