#!/usr/bin/env bash
# Session 24, call d6 (H200): issue 12's tables on kernel d5 (the guarded partial lap) with cost
# model d6 (5.75 clk per column per K block for 160- and 192-wide 128-row tiles, was 6.25):
# dense and grouped, DeepSeek-V3 and the broad suite, DeepGEMM 54e2261 and cuBLAS-blk in the
# same process, rotating rounds; every shape whose pick changed is also timed at the previous
# model's pick (--picks, bench/results/session24/picks/old_*.json) in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/d6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 590 - (SECONDS - t0) )); }
p=bench/results/session24/picks
for suite in deepseek_v3 broad; do
  say "dense $suite"
  timeout -k 5 $(left) python -m bench.bench_gemm --suite $suite --part all --picks $p/old_$suite.json \
    --json $o/d_$suite.json > $o/d_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/d_$suite.txt
done
for suite in broad deepseek_v3; do
  say "grouped $suite"
  timeout -k 5 $(left) python -m bench.bench_grouped --suite $suite --part all --picks $p/old_$suite.json \
    --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/g_$suite.txt
done
say done
cd $OUT && tar czf d6.tgz d6 && rm -rf d6
