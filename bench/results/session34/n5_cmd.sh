#!/usr/bin/env bash
# Session 34, call n5 (H200): the autotuning-on grouped tables (contiguous and masked) over
# the whole suite again, now that masked classes are timed on rows spread evenly over
# 0.7..1.3 x the M edge (classes.masked_rows; in n4 fixed-seed draws averaging 1.10 x the
# edge at four groups). Kernels precompiled on the CPU machine as for n3 (.kcache.tgz: the
# csrc tree and specs unchanged since); no decision carried: every class is tuned here.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/n5; mkdir -p $o
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
cd $OUT && tar czf n5.tgz n5 && rm -rf n5
