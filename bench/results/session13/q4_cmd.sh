#!/usr/bin/env bash
# Session 13, call q4 (H200): is contiguous 128x256 sharing B slow only in sustained runs?
# (q1: 0.88x the single-CTA tile in bench_grouped's profiler rounds; q3: 3% faster than it in
# one Nsight Compute launch.) Each config alone with CUDA events, back to back and flushed,
# SM clock and power logged by nvidia-smi every 100 ms.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 100 > $o/smi.csv 2>&1 &
smi=$!
for shape in "4 8192 4096 7168" "8 4096 7168 2048" "32 256 4096 7168"; do
  set -- $shape
  say "shape $shape"
  timeout -k 5 150 python -m bench.probe_sustained --groups $1 --rows $2 --n $3 --k $4 \
    --config deep_gemm --config 128x256 --config 128x256/mc2b --config 128x192/mc2b \
    --config 128x256 --calls 40 2>&1 | grep -v Warn
done
kill $smi
say done
cd $OUT && tar czf q4.tgz q4 && rm -rf q4
