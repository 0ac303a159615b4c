#!/usr/bin/env bash
# Session 13, call q5 (H200): does a config's place in each timed round bias it? (q4: the SM
# clock sags from ~1.98 to ~1.3..1.4 GHz under load; bench rounds always started with dgemm's
# pick.) Contiguous DeepSeek-V3 shapes with the pick timed twice (--control) and both clusters
# sharing B swept: once in the old fixed order, once rotating the first function per round.
# Then the broad contiguous shapes and the dense DeepSeek-V3 table with rotation.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
for order in fixed rotated; do
  flag=""; [ $order = fixed ] && flag="--fixed-order"
  say "contiguous deepseek_v3 $order"
  timeout -k 5 150 python -m bench.bench_grouped --suite deepseek_v3 --layout contiguous \
    --control --sweep 128x192/mc2b,128x256/mc2b $flag --json $o/c_ds_$order.json \
    > $o/c_ds_$order.txt 2>&1
  echo "rc $?"; grep -E "^contiguous|others|^\[" $o/c_ds_$order.txt
done
say "contiguous broad rotated"
timeout -k 5 200 python -m bench.bench_grouped --suite broad --part all --layout contiguous \
  --control --sweep 128x192/mc2b,128x256/mc2b,128x192 --json $o/c_broad.json > $o/c_broad.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/c_broad.txt
say "dense deepseek_v3 rotated"
timeout -k 5 $(( 580 - (SECONDS - t0) )) python -m bench.bench_gemm --suite deepseek_v3 \
  --json $o/d_ds.json > $o/d_ds.txt 2>&1
echo "rc $?"; grep -E "^\[|geomean" $o/d_ds.txt | head
say done
cd $OUT && tar czf q5.tgz q5 && rm -rf q5
