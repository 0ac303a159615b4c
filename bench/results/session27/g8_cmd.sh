#!/usr/bin/env bash
# Session 27, call g8 (H200): is g6/g7's 0.933/0.944 at contiguous 8 x 1024, 6144x16384 (the
# 128x256 tile sharing B, whose code kernel g5 does not change) a change of ours? compare_tiles
# in the contiguous layout, the heuristic's pick from the packaged csrc against the same pick
# from session 26's csrc (cf75f90, .exp/base), DeepGEMM 54e2261 in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/g8; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "compare_tiles"
timeout -k 5 400 python -m bench.compare_tiles --rounds 7 --groups 8 --shape 1024,6144,16384 \
  --shape 1024,4096,7168 --config heuristic --config "heuristic@$PWD/.exp/base/csrc" \
  --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct.txt | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'
say done
cd $OUT && tar czf g8.tgz g8 && rm -rf g8
