#!/usr/bin/env bash
# Session 16, call w8 (H200): issue 12's "autotuning on" table for the current kernel (s8's dense
# kernel; the last such table was kernel v22 and never reached the broad holdout's dense rows):
# bench_gemm --autotune on the DeepSeek-V3 shapes and the broad suite's holdout part, each in a
# fresh cache directory (every class tuned in the run; DGEMM_AUTOTUNE_TOP_K 4, the default).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w8; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
left() { echo $(( 590 - (SECONDS - t0) )); }
for run in "deepseek_v3 all" "broad holdout"; do
  set -- $run
  say "dense $1 $2 autotune"
  DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 $(left) python -m bench.bench_gemm --suite $1 \
    --part $2 --autotune --json $o/d_$1_$2.json > $o/d_$1_$2.txt 2>&1
  echo "rc $?"; grep -E "^\[|autotun|geomean" $o/d_$1_$2.txt | tail -6
done
say done
cd $OUT && tar czf w8.tgz w8 && rm -rf w8
