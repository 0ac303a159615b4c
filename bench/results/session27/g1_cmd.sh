#!/usr/bin/env bash
# Session 27, call g1 (H200): (1) the autotuning-on table (DeepSeek-V3 plus session 26's six
# extra rows, fresh caches) with the tuner's profiled timer in bursts (TIMING_METHOD 6: each
# candidate 1 untimed + 4 timed launches per round, as the benchmarks time); (2) is the
# small-M gap at DeepGEMM's own tile a fixed cost or a pace? compare_tiles over K at
# 128x4096xK (64x64, DeepGEMM's pick too) and 64x7168xK (64x56 / 64x64), DeepGEMM in the same
# rounds; stage-count sensitivity of 64x64.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/g1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 580 - (SECONDS - t0) )); }
say "autotuned dense"
DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 $(left) python -m bench.bench_gemm --suite deepseek_v3 --autotune \
  --extra 128,2304,16384 --extra 96,4096,7168 --extra 128,4096,4096 --extra 48,9216,4096 \
  --extra 384,4096,8192 --extra 64,7168,16384 --json $o/auto.json > $o/auto.txt 2>&1
echo "rc $?"; grep -E "^\[|tune |^ +[0-9]+ +[0-9]+ +[0-9]+ \||others" $o/auto.txt
say "K sweeps"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 \
  --shape 128,4096,256 --shape 128,4096,1024 --shape 128,4096,2048 --shape 128,4096,4096 \
  --shape 128,4096,7168 --shape 128,4096,16384 \
  --config 64x64 --config 64x64x8 --config 64x64x4 --json $o/k128.json > $o/k128.txt 2>&1
echo "rc $?"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 \
  --shape 64,7168,256 --shape 64,7168,1024 --shape 64,7168,2048 --shape 64,7168,8192 \
  --config 64x56 --config 64x64 --json $o/k64.json > $o/k64.txt 2>&1
echo "rc $?"
for f in k128 k64; do
  grep -vE "Warn|warn" $o/$f.txt | grep -E "^[0-9]+x|DeepGEMM  |^  64x" | sed 's/x cuBLAS.*x DeepGEMM/xDG/'
done
say done
cd $OUT && tar czf g1.tgz g1 && rm -rf g1
