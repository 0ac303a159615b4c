#!/usr/bin/env bash
# Session 29, call i6 (H200): did the stmatrix epilogue move the contiguous layout? i5 read its
# DeepSeek-V3 rows at 1.009 (h4: 1.020) with the same picks. Same rounds, DeepGEMM beside:
# the working tree against session 27's csrc (@head) on the contiguous rows (G groups of M rows).
# Then tests/gpu/test_hopper_gemm.py on the final tree (stmatrix only on the TMA-store path).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/i6; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+ x [0-9]+x|^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
for g in 4 8; do
  say "contiguous, $g groups"
  timeout -k 5 $(left) python -m bench.compare_tiles --rounds 7 --groups $g \
    --shape $(( 32768 / g )),4096,7168 --shape $(( 32768 / g )),7168,2048 --shape 1024,6144,16384 \
    --config heuristic --config "heuristic@$PWD/.exp/head/csrc" --json $o/ct_g$g.json > $o/ct_g$g.txt 2>&1
  echo "rc $?"; show $o/ct_g$g.txt
done
say "tests/gpu/test_hopper_gemm.py"
timeout -k 5 $(left) python -m pytest -q tests/gpu/test_hopper_gemm.py > $o/tests.txt 2>&1; echo "rc $?"; tail -3 $o/tests.txt
say done
cd $OUT && tar czf i6.tgz i6 && rm -rf i6
