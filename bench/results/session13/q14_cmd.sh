#!/usr/bin/env bash
# Session 13, call q14 (H200): weight-gradient clusters sharing B with rotating rounds, and the
# q10 m-band raster for them (experimental csrc copy in the ignored .exp/wgm: fp8_wgrad.cuh's
# tile_at only). Each run times DeepGEMM 54e2261 in the same process; compare the ratios.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q14; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
run() {  # label, env, args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 4 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean" $o/$label.txt
}
run pick "" 
run t128x2b "" --tile 128x2b
run t128x2b_mband $PWD/.exp/wgm --tile 128x2b
run t160x2b_mband $PWD/.exp/wgm --tile 160x2b
say done
cd $OUT && tar czf q14.tgz q14 && rm -rf q14
