#!/usr/bin/env bash
# Session 32, call l2 (H100, Nsight Compute): how evenly the SMs work in the one-wave small-M
# rows. l1 found SM active cycles (mean over SMs) ~73% of the elapsed cycles for both kernels at
# 128x4096x7168: per-SM sm__cycles_active (all 132 instances) for DeepGEMM 54e2261 and dgemm's
# pick, one launch each (caches flushed), at three small-M rows and one 4096-row row.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/l2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
metrics=sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.sum,gpc__cycles_elapsed.max,sm__ctas_launched.sum
for shape in "128 4096 7168" "48 9216 4096" "64 7168 2048" "4096 4096 7168"; do
  for impl in deep_gemm dgemm; do
    tag="${shape// /x}_$impl"
    python3 -m bench.profile_gemm --recipe dense --impl $impl --shape $shape --iters 1 > /dev/null 2>&1
    timeout -k 5 120 "$ncu" --clock-control none --kernel-name regex:'fp8_gemm_kernel|1d2d' \
      --launch-skip 1 --launch-count 3 --metrics $metrics,sm__cycles_active --print-metric-instances values --csv \
      python3 -m bench.profile_gemm --recipe dense --impl $impl --shape $shape --iters 4 > $o/$tag.csv 2>&1
    say "$tag rc $?"
  done
done
cd $OUT && tar czf l2.tgz l2 && rm -rf l2
say done
