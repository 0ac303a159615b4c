#!/usr/bin/env bash
# Session 34, call n7 (H200): the autotuning-on grouped tables over the whole suite again,
# with masked draws from light to heavy load (classes.masked_rows: draw d holds the d-th run
# of the strata; in n6 every draw had the same load) and the per-draw rule of n6 (a
# replacement of the heuristic's pick loses by at most 2% on every draw). Kernels
# precompiled on the CPU machine (.kcache.tgz); no decision carried.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/n7; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
rm -rf .kcache && tar xzf .kcache.tgz
export DGEMM_CACHE_DIR=$PWD/.kcache
ls $DGEMM_CACHE_DIR/decisions 2> /dev/null && say "stale decisions" && exit 1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for suite in deepseek_v3 broad; do
  say "autotuned grouped $suite"
  timeout -k 5 $(left) python -m bench.bench_grouped --suite $suite --part all --autotune \
    --json $o/gauto_$suite.json > $o/gauto_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[|autotuned|precompiled" $o/gauto_$suite.txt
done
say done
tar czf $o/decisions.tgz -C $DGEMM_CACHE_DIR decisions
cd $OUT && tar czf n7.tgz n7 && rm -rf n7
