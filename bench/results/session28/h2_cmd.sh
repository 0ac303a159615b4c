#!/usr/bin/env bash
# Session 28, call h2 (H200): the chain pair's hand-over in one round (working tree: the head of
# shared memory grows to hold warpgroup 1's partial sums where the tile's stage count leaves
# room; 16-byte chunks; split arrive/sync barriers) against session 27's two rounds through the
# output buffer (.exp/h_base), heuristic picks from both sources in the same rounds, DeepGEMM
# 54e2261 beside them; the sanitizer smoke (now with 64-row pairs at 9 and 56 K blocks) under
# memcheck, synccheck and racecheck; the forward GPU tests.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/h2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
say "compare_tiles: one-round hand-over vs session 27"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 7 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 64,7168,2048 --shape 64,4096,7168 \
  --shape 128,2112,7168 --shape 64,2112,7168 --shape 64,24576,1536 --shape 48,9216,4096 \
  --shape 96,4096,7168 --shape 64,7168,16384 --shape 128,2304,16384 --shape 64,4096,2048 \
  --config heuristic --config "heuristic@$PWD/.exp/h_base/csrc" --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck racecheck; do
  say "$tool"
  timeout -k 5 120 $san --tool $tool --report-api-errors no python -m bench.sanitizer_smoke \
    > $o/$tool.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" $o/$tool.txt | head -5
done
say "tests/gpu (forward)"
timeout -k 5 $(left) python -m pytest -q tests/gpu --ignore tests/gpu/test_wgrad_gpu.py \
  --ignore tests/gpu/test_training_gpu.py > $o/tests.txt 2>&1; echo "rc $?"; tail -3 $o/tests.txt
say done
cd $OUT && tar czf h2.tgz h2 && rm -rf h2
