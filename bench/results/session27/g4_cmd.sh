#!/usr/bin/env bash
# Session 27, call g4 (H200): what the split-K reduction of 64-row tiles costs (probes, not
# kept). The two math warpgroups of a 64-row tile take alternate stages and warpgroup 1 hands
# its partial sums to warpgroup 0 through shared memory (two halves, four 256-thread barriers)
# before the epilogue. .exp/nored: no hand-over (warpgroup 1's sums dropped: wrong results,
# timing only); .exp/onewg: warpgroup 0 takes every stage and there is no hand-over (one
# chain, as DeepGEMM's 64-row tile; right results). compare_tiles, the heuristic's pick from
# each source in the same rounds, DeepGEMM 54e2261 beside them.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/g4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 570 - (SECONDS - t0) )); }
say "compare_tiles"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 \
  --shape 128,4096,256 --shape 128,4096,4096 --shape 128,4096,7168 --shape 64,7168,2048 \
  --shape 48,9216,4096 --shape 64,32768,512 --shape 64,24576,1536 --shape 64,4096,7168 \
  --config heuristic --config "heuristic@$PWD/.exp/nored/csrc" \
  --config "heuristic@$PWD/.exp/onewg/csrc" --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct.txt | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'
say done
cd $OUT && tar czf g4.tgz g4 && rm -rf g4
