#!/usr/bin/env bash
# Session 25, call e1 (H200): K-split pairs (kernel e1: two CTAs of a cluster per tile, each
# half of K, the partial sums exchanged through distributed shared memory, each CTA storing
# half of the tile's columns). GPU tests of the new tiles and memcheck of the sanitizer smoke
# (K-split tiles included), then the tiles timed on the small-M dense shapes with DeepGEMM
# 54e2261 and cuBLAS-blk in the same rounds (compare_tiles).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/e1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
say "gpu tests (K-split)"
timeout -k 5 150 python -m pytest -q -x tests/gpu/test_hopper_gemm.py -k "k_split" > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck"
timeout -k 5 120 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait; . /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "compare_tiles"
timeout -k 5 $(( 590 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 3 \
  --shape 128,4096,7168 --shape 128,4096,4096 --shape 128,2112,7168 --shape 64,4096,7168 \
  --shape 128,7168,16384 --shape 128,7168,2048 --shape 64,7168,16384 --shape 96,4096,7168 \
  --shape 256,4096,7168 --shape 384,4096,8192 --shape 128,2304,16384 --shape 48,9216,4096 \
  --config heuristic --config 128x32/ks2 --config 128x48/ks2 --config 128x64/ks2 \
  --config 128x96/ks2 --config 128x128/ks2 --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/ct.txt | grep -E "^[0-9]|heur|Deep|ks2" | head -120
say done
cd $OUT && tar czf e1.tgz e1 && rm -rf e1
