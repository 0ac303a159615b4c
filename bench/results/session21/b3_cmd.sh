#!/usr/bin/env bash
# Session 21, call b3 (H200), on the committed chunk-ring kernel (5 stages at 128 and 136):
# the heuristic's widths re-timed now that 136 has five stages (bench_wgrad --tile 136x1 and
# 120x1, 2 rounds), then Nsight Compute at 2112x7168x16384 (ours 136x1 and 136x2b, DeepGEMM)
# for the L2 and tensor-pipe load: is the single-CTA tile L2-bandwidth-bound, and what does the
# pair change.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/b3; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; echo "dg rc $?"
. /tmp/dg_env
run() {  # label, bench_wgrad args
  local label=$1; shift
  say "$label"
  timeout -k 5 100 python -m bench.bench_wgrad --rounds 2 "$@" --json $o/$label.json \
    > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|rror" $o/$label.txt | head -3
}
run pick
run w136 --tile 136x1
run w120 --tile 120x1
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
prof() {  # label, impl, profile_gemm args
  local label=$1 impl=$2; shift 2
  say "ncu $label"
  timeout -k 5 100 $ncu --clock-control none --kernel-name regex:'fp8_wgrad|1d1d' \
    --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum \
    python -m bench.profile_gemm --recipe wgrad --shape 2112 7168 16384 --iters 2 --impl $impl "$@" \
    > $o/ncu_$label.txt 2>&1
  echo "rc $?"; grep -E "Duration|Elapsed Cycles|SM Frequency|gmma|L2 Cache Throughput|lts__t_bytes|xbar2l1tex|dram__bytes" $o/ncu_$label.txt | head -12
}
prof ours136 dgemm --tile 136x1
prof ours136b dgemm --tile 136x2b
prof dg deep_gemm
say done
cd $OUT && tar czf b3.tgz b3 && rm -rf b3
