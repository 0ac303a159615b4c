#!/usr/bin/env bash
# Session 13, call q7 (H200): issue 12's dense tables (DeepSeek-V3 and broad) with the timing
# rotation, DeepGEMM 54e2261 and cuBLAS-blk in the same process and rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q7; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for suite in deepseek_v3 broad; do
  say "dense $suite"
  timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_gemm --suite $suite \
    --part all --json $o/d_$suite.json > $o/d_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/d_$suite.txt
done
say done
cd $OUT && tar czf q7.tgz q7 && rm -rf q7
