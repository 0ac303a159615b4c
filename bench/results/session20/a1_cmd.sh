#!/usr/bin/env bash
# Session 20, call a1 (H200): the weight gradient's promotion as column scale first, row scale
# in the FFMA (.exp/rowlast: t = acc * b, final = fma(t, a, final); a stays in one operand
# slot, two register reads per instruction), and the same with the oldest K block's scales
# read before `wait_group 1` (.exp/rowlast_early). Order base, rl, rle, rl, base; bench_wgrad
# (24 rows, 2 rounds, DeepGEMM stock in every run; wrong results are reported as WRONG).
# Then Nsight Compute's pipe utilisation of base and rowlast at 2112x7168x16384.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/a1; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, csrc ("" = the tree's), bench_wgrad args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 150 python -m bench.bench_wgrad --rounds 2 "$@" \
    --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run base1 ""
run rl1 $root/.exp/rowlast/csrc
run rle1 $root/.exp/rowlast_early/csrc
run rl2 $root/.exp/rowlast/csrc
run base2 ""
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
say "ncu metrics list"
$ncu --query-metrics --chip gh100 2>&1 | grep -i -E "pipe_(tensor|fma|fp|alu|shared)|issue_active|inst_executed_pipe" > $o/ncu_metrics.txt
prof() {  # label, csrc
  say "ncu $1"
  DGEMM_CSRC_DIR=$2 timeout -k 5 100 $ncu --clock-control none --kernel-name regex:'fp8_wgrad|1d1d' \
    --launch-skip 1 --launch-count 1 --section ComputeWorkloadAnalysis --section SpeedOfLight \
    --metrics regex:'sm__pipe_.*_cycles_active.avg.pct_of_peak_sustained_active',regex:'sm__inst_executed_pipe_.*.avg.pct_of_peak_sustained_active' \
    python -m bench.profile_gemm --recipe wgrad --shape 2112 7168 16384 --iters 2 --impl $3 > $o/ncu_$1.txt 2>&1
  echo "rc $?"; grep -E "Duration|SM Frequency|tensor|fma " $o/ncu_$1.txt | head -12
}
prof base "" dgemm
prof rl $root/.exp/rowlast/csrc dgemm
prof dg "" deep_gemm
say done
cd $OUT && tar czf a1.tgz a1 && rm -rf a1
