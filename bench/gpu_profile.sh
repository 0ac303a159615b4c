#!/usr/bin/env bash
# Nsight Compute on dgemm's kernel (tiles given as arguments, or the heuristic's pick with
# `heuristic`) and DeepGEMM 54e2261's, one launch each of the same shape (bench/NOTES.md, wgrad
# v2 and p1). From the repository root with .anchors/:
#     bash bench/gpu_profile.sh dense|contiguous|wgrad M N K TILE...
# (contiguous: NUM_GROUPS groups, default 4, of M rows each; a wgrad TILE@S holds S stages).
# Reports go to $OUT (default /tmp/prof-out); PROFILE_SOURCE=1 adds the per-instruction stall
# sampling (SourceCounters section) and exports each kernel's SASS with its per-instruction
# samples and execution counts as ncu_LABEL.sass.csv (the tables of bench/NOTES.md q8, q13).
set -uo pipefail
out=${OUT:-/tmp/prof-out}; mkdir -p "$out"
recipe=$1 m=$2 n=$3 k=$4; shift 4
case $recipe in
  dense|contiguous) kernels='fp8_gemm_kernel|1d2d' ;;
  wgrad) kernels='fp8_wgrad|1d1d' ;;
  *) echo "gpu_profile.sh: the recipe is dense, contiguous or wgrad; got $recipe" >&2; exit 2 ;;
esac
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
[ -z "$ncu" ] && { echo "no ncu on this machine"; exit 2; }
if [ ! -f /tmp/dg_env ]; then
  bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> "$out/deepgemm_setup.err" || rm -f /tmp/dg_env
fi
[ -f /tmp/dg_env ] && . /tmp/dg_env
sections="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
[ "${PROFILE_SOURCE:-0}" = 1 ] && sections="$sections --section SourceCounters"
profile() {   # $1 label, rest: the profile_gemm arguments
  local label=$1; shift
  python3 -m bench.profile_gemm --recipe "$recipe" --groups "${NUM_GROUPS:-4}" \
    --shape "$m" "$n" "$k" --iters 1 "$@" \
    > /dev/null 2>&1  # JIT
  local name="ncu_${label//\//_}" report=()
  [ "${PROFILE_SOURCE:-0}" = 1 ] && report=(-o "$out/$name" -f)
  timeout -k 5 150 "$ncu" --clock-control none --kernel-name regex:"$kernels" --launch-skip 1 \
    --launch-count 1 $sections ${report[@]+"${report[@]}"} python3 -m bench.profile_gemm --recipe "$recipe" \
    --groups "${NUM_GROUPS:-4}" --shape "$m" "$n" "$k" --iters 2 "$@" > "$out/$name.txt" 2>&1
  echo "== $label rc $?"
  if [ -f "$out/$name.ncu-rep" ]; then    # the report's pages instead of ncu's live print
    "$ncu" --import "$out/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1
    "$ncu" --import "$out/$name.ncu-rep" --page source --print-source sass --csv \
      > "$out/$name.sass.csv" 2>&1
    rm -f "$out/$name.ncu-rep"
  fi
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued|Registers Per|Executed Ipc A" "$out/$name.txt" | head -30
}
profile deep_gemm --impl deep_gemm
for tile in "$@"; do
  if [ "$tile" = heuristic ]; then profile dgemm --impl dgemm
  elif [[ $tile == *@* ]]; then
    profile "dgemm_${tile/@/_s}" --impl dgemm --tile "${tile%@*}" --stages "${tile#*@}"
  else profile "dgemm_$tile" --impl dgemm --tile "$tile"; fi
done
