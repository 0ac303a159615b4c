#!/usr/bin/env bash
# Session 13, call q15 (H200): our 2-CTA weight-gradient tile (128x2b, sharing B) at q13's shape,
# to see why it runs slower than single CTAs (q14): Nsight Compute with per-instruction sampling,
# exported as SASS CSVs (DeepGEMM: q13).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q15; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }


ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
prof() {  # label, profile_gemm args...
  local label=$1; shift
  python3 -m bench.profile_gemm --recipe wgrad --shape 7168 16384 16384 --iters 1 "$@" > /dev/null 2>&1
  timeout -k 5 200 $ncu --clock-control none --kernel-name regex:'fp8_wgrad|1d1d' \
    --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis \
    --import-source no -o $o/$label -f \
    python3 -m bench.profile_gemm --recipe wgrad --shape 7168 16384 16384 --iters 2 "$@" \
    > $o/$label.log 2>&1
  echo "$label rc $?"
  $ncu --import $o/$label.ncu-rep --page details > $o/$label.txt 2>&1
  $ncu --import $o/$label.ncu-rep --page source --print-source sass --csv > $o/$label.sass.csv 2>&1
  grep -E "Duration|Elapsed Cycles|Grid Size|Cluster Size|Block Size|Dynamic Shared|Compute \(SM\)|L2 Hit|DRAM Through|Warp Cycles Per Issued" $o/$label.txt
}

prof ours_128x2b --impl dgemm --tile 128x2b
prof ours_128x1 --impl dgemm --tile 128x1
rm -f $o/*.ncu-rep
say done
cd $OUT && tar czf q15.tgz q15 && rm -rf q15
