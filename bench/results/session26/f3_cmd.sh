#!/usr/bin/env bash
# Session 26, call f3 (H200): issue 12's tables on kernel f3 (single-CTA tiles and K-split
# pairs walk bands of 16 m-blocks m-fastest, as clusters sharing B already did; f2): dense and
# grouped, DeepSeek-V3 and the broad suite, DeepGEMM 54e2261 and cuBLAS-blk in the same
# process, rotating rounds. Heuristic and cost model unchanged (session 24's d6).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/f3; mkdir -p $o
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
say done
cd $OUT && tar czf f3.tgz f3 && rm -rf f3
