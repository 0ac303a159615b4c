#!/usr/bin/env bash
# Session 12, call p4 (H200): issue 12's tables on kernel p1 + cost model p1, DeepGEMM 54e2261
# and cuBLAS-blk in the same process and rounds (heuristic picks, no --picks).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( ${BUDGET_S:-585} - (SECONDS - t0) )); }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $o/gpu.txt
run() {  # label, module, args...
  local label=$1; shift; say "$label"
  timeout -k 5 $(( $(left) > 10 ? $(left) : 10 )) python -m "$@" --json $o/$label.json \
    > $o/$label.txt 2>&1; echo "$label rc $?"; grep -E "^\[|geomean" $o/$label.txt | tail -4
}
run d_ds bench.bench_gemm --suite deepseek_v3
run g_ds bench.bench_grouped --suite deepseek_v3
run d_broad bench.bench_gemm --suite broad --part all
run g_broad bench.bench_grouped --suite broad --part all
say done
cd $OUT && tar czf p4.tgz p4 && rm -rf p4
