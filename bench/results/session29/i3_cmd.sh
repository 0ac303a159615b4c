#!/usr/bin/env bash
# Session 29, call i3 (H200): kernel i3 = both epilogue paths staged with stmatrix (the working
# tree) against session 27's kernel (@head = HEAD's csrc) on TMA-store and padded-path tiles,
# DeepGEMM 54e2261 in the same rounds; memcheck and synccheck of the sanitizer smoke; tests/gpu
# without the weight-gradient and training files (their kernel is unchanged).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/i3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
say "compare_tiles: stmatrix epilogue vs session 27"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 \
  --shape 384,4096,8192 --shape 1024,5120,8192 --shape 64,6144,4096 --shape 48,9216,4096 \
  --shape 100,37888,3584 --shape 4096,2112,7168 --shape 2047,6144,16384 --shape 4096,4096,7168 \
  --shape 4096,7168,2048 --shape 128,4096,7168 --shape 511,3072,4096 --shape 3000,576,7168 \
  --config heuristic --config "heuristic@$PWD/.exp/head/csrc" --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck; do
  say "$tool"
  timeout -k 5 120 $san --tool $tool --report-api-errors no python -m bench.sanitizer_smoke \
    > $o/$tool.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY|calc_diff|max" $o/$tool.txt | head -5
done
say "tests/gpu (forward)"
timeout -k 5 $(left) python -m pytest -q tests/gpu --ignore tests/gpu/test_wgrad_gpu.py \
  --ignore tests/gpu/test_training_gpu.py > $o/tests.txt 2>&1; echo "rc $?"; tail -3 $o/tests.txt
say done
cd $OUT && tar czf i3.tgz i3 && rm -rf i3
