#!/usr/bin/env bash
# Session 17, call x4 (H200): cost model x4 (a 2-CTA cluster sharing B whose pair holds all of
# M: allowed from one wave, cycles x 0.96; fitted on x3's fit shapes). The five broad-suite
# picks it changes (fit: 200x10240x8192, 256x57344x8192, 256x32768x6144; holdout: 200x37888x3584, 200x51200x5120) against the old picks in the same
# rounds, DeepGEMM 54e2261 and cuBLAS-blk beside them; then the GPU GEMM tests.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/x4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
ct() {  # label, old config, shapes...
  local label=$1 old=$2; shift 2
  say "$label"
  local args=(); for s in "$@"; do args+=(--shape "$s"); done
  timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 7 "${args[@]}" \
    --config heuristic --config "$old" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "^[0-9]|DeepGEMM  |heuristic|^  $old " $o/$label.txt
}
ct w160 128x160 200,10240,8192 200,51200,5120
ct w192 128x192 200,37888,3584
ct w128 128x128 256,57344,8192
ct w256 128x256 256,32768,6144
say "gpu gemm tests"
timeout -k 5 $(( 590 - (SECONDS - t0) )) python -m pytest -q tests/gpu/test_hopper_gemm.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -1 $o/tests.txt
say done
cd $OUT && tar czf x4.tgz x4 && rm -rf x4
