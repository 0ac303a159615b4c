#!/usr/bin/env bash
# Session 18, call y1 (H200): where the weight gradient loses to DeepGEMM 54e2261.
#  - same tile, same cluster: DeepGEMM rebuilt with DG_FORCE_LAYOUT (bench/deepgemm_forced.sh)
#    against `bench_wgrad --tile` at 120x1, 128x1, 136x2b (unset: the stock heuristic);
#  - ablations of our kernel (ignored csrc copies in .exp/, wrong results by design):
#    nopromo (no per-K-block promotion), noload (no A/B loads), both;
#  - two small changes: scales_first (the stage's scales read before the WGMMA issue, as
#    DeepGEMM does), suspend (mbarrier try_wait with a suspend-time hint, as CUTLASS's).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
say "DeepGEMM (forced-layout hook) build"
bash bench/deepgemm_forced.sh > /tmp/dgf_env 2> $o/dg_setup.err; echo "rc $?"
. /tmp/dgf_env
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
run() {  # label, csrc ("" = main), DG_FORCE_LAYOUT ("" = stock), bench_wgrad args
  local label=$1 csrc=$2 force=$3; shift 3
  say "$label"
  DG_FORCE_LAYOUT=$force DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 585 - (SECONDS - t0) )) \
    python -m bench.bench_wgrad --rounds 2 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT|failed" $o/$label.txt | head -3
}
run base "" ""
run same120 "" "128,120,1,1" --tile 120x1
run same136b "" "128,136,2,1" --tile 136x2b
run same128 "" "128,128,1,1" --tile 128x1
run nopromo $PWD/.exp/nopromo/csrc ""
run noload $PWD/.exp/noload/csrc ""
run both $PWD/.exp/both/csrc ""
run scales_first $PWD/.exp/scales_first/csrc ""
run suspend $PWD/.exp/suspend/csrc ""
run base_b "" ""
say done
cd $OUT && tar czf y1.tgz y1 && rm -rf y1
