#!/usr/bin/env bash
# Session 15, call s5 (H200): kernel probe "prodlap" (ignored csrc copy .exp/prodlap): the TMA
# producer walks the ring in unrolled laps (compile-time stage), fewer instructions per K
# block (s4: our producer set the pace of the 64-row split-K tiles). Correctness first (the
# sm_90a GEMM GPU tests and memcheck of the sanitizer smoke, both compiled from the copy),
# then compare_tiles: main's kernel and the copy's (and its alt_rolled variant: the warp-wide
# producer without the laps) in the same rounds as DeepGEMM.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
w=$PWD/.exp/prodlap
(bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err) &
dg=$!
say "gpu tests on the copy"
DGEMM_CSRC_DIR=$w timeout -k 5 200 python -m pytest -q -p no:cacheprovider -x \
  tests/gpu/test_hopper_gemm.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
say "memcheck on the copy"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
DGEMM_CSRC_DIR=$w timeout -k 5 100 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
say "synccheck on the copy"
DGEMM_CSRC_DIR=$w timeout -k 5 100 $san --tool synccheck python -m bench.sanitizer_smoke \
  > $o/synccheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/synccheck.txt
wait $dg; . /tmp/dg_env
for shape in 128,4096,7168 64,2112,7168 128,2112,7168 4096,4096,7168 4096,7168,2048 511,3072,4096; do
  say "ab $shape"
  timeout -k 5 90 python -m bench.compare_tiles --shape $shape --rounds 5 --config heuristic \
    --config heuristic@$w --config heuristic@$w/alt_rolled --config 64x64 --config 64x64@$w \
    --json $o/ab_${shape//,/x}.json > $o/ab_${shape//,/x}.txt 2>&1
  echo "rc $?"; tail -6 $o/ab_${shape//,/x}.txt
done
say "ab contiguous 4 x 8192 rows, 4096x7168"
timeout -k 5 90 python -m bench.compare_tiles --groups 4 --shape 8192,4096,7168 --rounds 5 \
  --config heuristic --config heuristic@$w --config heuristic@$w/alt_rolled --json $o/ab_c4.json > $o/ab_c4.txt 2>&1
echo "rc $?"; tail -4 $o/ab_c4.txt
say done
cd $OUT && tar czf s5.tgz s5 && rm -rf s5
