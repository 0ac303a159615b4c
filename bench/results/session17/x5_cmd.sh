#!/usr/bin/env bash
# Session 17, call x5 (H200): issue 12's dense tables with cost model x4 (kernels unchanged since
# session 15's s8; the grouped picks too): DeepSeek-V3 and the broad suite, rotating rounds,
# DeepGEMM 54e2261 and cuBLAS-blk in the same process.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/x5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 590 - (SECONDS - t0) )); }
for suite in deepseek_v3 broad; do
  say "dense $suite"
  timeout -k 5 $(left) python -m bench.bench_gemm --suite $suite --part all \
    --json $o/d_$suite.json > $o/d_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/d_$suite.txt
done
say done
cd $OUT && tar czf x5.tgz x5 && rm -rf x5
