#!/usr/bin/env bash
# Nsight Compute on dgemm's wgrad kernel (tiles given as arguments) and DeepGEMM 54e2261's
# 1d1d kernel, one launch each of the same shape (bench/NOTES.md, wgrad v2). From the
# repository root with .anchors/:  bash bench/gpu_profile_wgrad.sh M N K TILE...
set -uo pipefail
out=${OUT:-/tmp/prof-out}; mkdir -p "$out"
m=$1 n=$2 k=$3; shift 3
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
[ -z "$ncu" ] && { echo "no ncu on this machine"; exit 2; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> "$out/deepgemm_setup.err" && . /tmp/dg_env
sections="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
profile() {   # $1 label, rest: the profile_wgrad arguments
  local label=$1; shift
  python3 -m bench.profile_wgrad --shape "$m" "$n" "$k" --iters 1 "$@" > /dev/null 2>&1  # JIT
  timeout -k 5 120 "$ncu" --kernel-name regex:'fp8_wgrad|1d1d' --launch-skip 1 --launch-count 1 \
    $sections python3 -m bench.profile_wgrad --shape "$m" "$n" "$k" --iters 2 "$@" \
    > "$out/ncu_$label.txt" 2>&1
  echo "== $label rc $?"; grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued|Registers Per|Executed Ipc A" "$out/ncu_$label.txt" | head -30
}
profile deep_gemm --impl deep_gemm
for tile in "$@"; do profile "dgemm_$tile" --impl dgemm --tile "$tile"; done
