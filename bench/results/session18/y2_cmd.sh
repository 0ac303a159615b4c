#!/usr/bin/env bash
# Session 18, call y2 (H200): the weight gradient's ~6% at DeepGEMM's own 128x1 tile (y1).
# A/B in one process each (`bench_wgrad --rounds 2`, DeepGEMM 54e2261 stock beside it):
#  rul10        ptxas --register-usage-level=10 (DeepGEMM's JIT flag; .exp/flags_run.py)
#  scales_first the stage's scales read before the WGMMA issue (y1: 0.918 vs 0.900/0.902)
#  band8        bands of 8 n-blocks instead of 16 (half the operand slice re-read per wave)
#  sf_band8_rul10 all three
#  ablations (wrong results, timed with --time-wrong, dense rows only): nopromo, both
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
R10="-Xptxas --register-usage-level=10"
run() {  # label, csrc ("" = main), extra NVRTC flags, bench_wgrad args
  local label=$1 csrc=$2 flags=$3; shift 3
  say "$label"
  PROBE_NVRTC_FLAGS=$flags DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 585 - (SECONDS - t0) )) \
    python .exp/flags_run.py --rounds 2 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|FAULT|failed" $o/$label.txt | head -3
}
run base "" ""
run rul10 "" "$R10"
run scales_first $PWD/.exp/scales_first/csrc ""
run band8 $PWD/.exp/band8/csrc ""
run sf_band8_rul10 $PWD/.exp/sf_band8/csrc "$R10"
run nopromo $PWD/.exp/nopromo/csrc "" --time-wrong --kinds wgrad
run both $PWD/.exp/both/csrc "" --time-wrong --kinds wgrad
run base_b "" ""
say done
cd $OUT && tar czf y2.tgz y2 && rm -rf y2
