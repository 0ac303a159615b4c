#!/usr/bin/env bash
# Session 16, call w4 (H200): the weight-gradient math warpgroups issue their WGMMAs in turns
# (named barriers 3/4), so that one warpgroup's promotion (per-element FMUL/FFMA) runs while the
# other's WGMMAs do. A/B: the heuristic's picks from the tree before the change (.exp/base, an
# ignored copy of csrc as of w3's kernel) and from main, each process
# timing DeepGEMM 54e2261 beside it; then the GPU wgrad tests and synccheck/racecheck.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
run() {  # label, csrc, args
  local label=$1 csrc=$2; shift 2
  say "$label"
  DGEMM_CSRC_DIR=$csrc timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_wgrad \
    --rounds 3 "$@" --json $o/$label.json > $o/$label.txt 2>&1
  echo "rc $?"; grep -E "geomean|WRONG|FAULT" $o/$label.txt
}
run base $PWD/.exp/base/csrc
run turns ""
run turns_t136x1 "" --tile 136x1
run base_b $PWD/.exp/base/csrc
say "gpu wgrad tests"
timeout -k 5 120 python -m pytest -q tests/gpu/test_wgrad_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in synccheck racecheck; do
  say "$tool"
  timeout -k 5 60 $san --tool $tool python -m bench.sanitizer_wgrad > $o/$tool.txt 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|HAZARD" $o/$tool.txt | head -3
done
say done
cd $OUT && tar czf w4.tgz w4 && rm -rf w4
