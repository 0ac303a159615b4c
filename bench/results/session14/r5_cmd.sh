#!/usr/bin/env bash
# Session 14, call r5 (H200): session 13's q8 again on kernels r1 + r2 (staged tiles): where the warps stall, ours against
# DeepGEMM's: contiguous 4 x 8192 rows, 4096x7168, 128x192 in 2-CTA clusters sharing B (DeepGEMM's
# own choice there) and our pick 128x256 sharing B. Nsight Compute reports with per-instruction stall sampling, exported as the
# SASS source page (CSV) of each.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/r5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
prof() {  # label, profile_gemm args...
  local label=$1; shift
  python3 -m bench.profile_gemm --recipe contiguous --groups 4 --shape 8192 4096 7168 --iters 1 "$@" > /dev/null 2>&1
  timeout -k 5 200 $ncu --clock-control none --kernel-name regex:'fp8_gemm_kernel|1d2d' \
    --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SourceCounters --section LaunchStats --import-source no -o $o/$label -f \
    python3 -m bench.profile_gemm --recipe contiguous --groups 4 --shape 8192 4096 7168 \
    --iters 2 "$@" > $o/$label.log 2>&1
  echo "$label rc $?"
  $ncu --import $o/$label.ncu-rep --page details > $o/$label.txt 2>&1
  $ncu --import $o/$label.ncu-rep --page source --print-source sass --csv > $o/$label.sass.csv 2>&1
  echo "$label: $(wc -l < $o/$label.sass.csv) sass rows"
  grep -E "Duration|Elapsed Cycles|Grid Size|Cluster Size|Dynamic Shared|Warp Cycles Per Issued" $o/$label.txt
}
prof deep_gemm --impl deep_gemm
prof ours_192mc2b --tile 128x192/mc2b
prof ours_256mc2b --tile 128x256/mc2b
rm -f $o/*.ncu-rep
say done
cd $OUT && tar czf r5.tgz r5 && rm -rf r5
