#!/usr/bin/env bash
# Session 28, call h3 (H200): the chain pair's hand-over, three ways under the same shared-memory
# plan (h2's old-kernel column could not build: session 27's csrc refuses the new plan):
# heuristic = working tree (one round where the head has room, split arrive/sync barriers),
# @h_ss = the same with bar.sync on both sides, @h_old2 = session 27's two rounds of scalar
# stores through the output buffer with four full barriers. DeepGEMM 54e2261 in the same rounds.
# Then racecheck of the sanitizer smoke on @h_ss (h2's racecheck flagged the arrive/sync pair).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/h3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
say "compare_tiles: hand-over variants"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 7 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 64,7168,2048 --shape 64,4096,7168 \
  --shape 128,2112,7168 --shape 64,2112,7168 --shape 64,24576,1536 --shape 48,9216,4096 \
  --shape 96,4096,7168 --shape 64,7168,16384 --shape 128,2304,16384 --shape 64,4096,2048 \
  --config heuristic --config "heuristic@$PWD/.exp/h_ss/csrc" \
  --config "heuristic@$PWD/.exp/h_old2/csrc" --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; show $o/ct.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "racecheck @h_ss"
DGEMM_CSRC_DIR=$PWD/.exp/h_ss/csrc timeout -k 5 120 $san --tool racecheck --report-api-errors no \
  python -m bench.sanitizer_smoke > $o/racecheck_ss.txt 2>&1; echo "rc $?"
grep -E "RACECHECK SUMMARY" $o/racecheck_ss.txt
grep -E "Race reported" $o/racecheck_ss.txt | grep -oE "fp8_gemm_kernel<[^>]*>" | sort | uniq -c
say done
cd $OUT && tar czf h3.tgz h3 && rm -rf h3
