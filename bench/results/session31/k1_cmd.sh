#!/usr/bin/env bash
# Session 31, call k1 (H200): the masked cost model (sum-over-groups waves, partly filled last
# m-blocks, the 160/192-wide factor) against the previous one's picks (--picks, same rounds), on
# 30 shapes it moves that no suite holds (k1_manifest.json: sampled from a grid of 1792, 295
# moved), then on the broad and DeepSeek-V3 masked rows, DeepGEMM 54e2261 beside each.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/k1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
r=bench/results/session31
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
say "probe: 30 moved shapes"
timeout -k 5 $(( $(left) - 200 )) python $r/manifest_probe.py $r/k1_manifest.json grouped \
  --layout masked --picks $r/k1_old_picks.json --json $o/probe.json > $o/probe.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/probe.txt
say "broad masked"
timeout -k 5 $(( $(left) - 90 )) python -m bench.bench_grouped --suite broad --layout masked \
  --picks $r/k1_old_broad_picks.json --json $o/broad.json > $o/broad.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/broad.txt
say "deepseek_v3 masked"
timeout -k 5 $(left) python -m bench.bench_grouped --suite deepseek_v3 --layout masked \
  --picks $r/k1_old_ds_picks.json --json $o/ds.json > $o/ds.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/ds.txt
say done
cd $OUT && tar czf k1.tgz k1 && rm -rf k1
