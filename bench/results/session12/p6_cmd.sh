#!/usr/bin/env bash
# Session 12, call p6 (H200): the grouped tables again after p1b (64-row split-K tiles back to
# the run-time scale split), with 128x192 and 128x256 swept on every grouped shape (is the
# p1 kernel's 128x192 now a contiguous tile?). DeepGEMM 54e2261 in the same process.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for suite in deepseek_v3 broad; do
  say "$suite"
  timeout -k 5 $(( 560 - (SECONDS - t0) )) python -m bench.bench_grouped --suite $suite \
    --part all --sweep 128x192,128x256 --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/g_$suite.txt
done
say done
cd $OUT && tar czf p6.tgz p6 && rm -rf p6
