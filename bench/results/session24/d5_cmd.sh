#!/usr/bin/env bash
# Session 24, call d5 (H200): kernel d5 (the guarded partial lap as one branch / one jump out,
# d3's lap change alone; the TMA-store epilogue of d3 reverted after d4). GPU tests of the
# sm_90a GEMMs, memcheck and synccheck of the sanitizer smoke; then a probe for the cost model:
# broad-suite shapes whose pick has between one and two waves of tiles (where clusters are not
# offered unless a pair holds all of M) with 2-CTA clusters and 128x160 / 128x192 tiles,
# DeepGEMM 54e2261 in the same rounds. Fit part: 129x28672x4096, 777x8192x8192, 777x8192x6144,
# 777x6144x6144, 1536x3584x18944; holdout (to check a rule, not to fit it): 1024x5120x8192,
# 777x9216x4096.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/d5; mkdir -p $o; root=$PWD
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu tests"
timeout -k 5 230 python -m pytest -q tests/gpu/test_hopper_gemm.py tests/gpu/test_scale_layouts.py \
  tests/gpu/test_validation_gpu.py tests/gpu/test_cuda_graphs.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
say "memcheck"
timeout -k 5 100 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
say "synccheck"
timeout -k 5 60 $san --tool synccheck python -m bench.sanitizer_smoke > $o/synccheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/synccheck.txt
wait; . /tmp/dg_env
say "clusters"
timeout -k 5 $(( 590 - (SECONDS - t0) )) python -m bench.compare_tiles --rounds 3 \
  --shape 129,28672,4096 --shape 777,8192,8192 --shape 777,8192,6144 --shape 777,6144,6144 \
  --shape 1536,3584,18944 --shape 1024,5120,8192 --shape 777,9216,4096 \
  --config heuristic --config 192x128/mc2a --config 128x256/mc2b --config 128x160 \
  --config 128x160/mc2b --config 128x192 --config 128x192/mc2b --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"
say done
cd $OUT && tar czf d5.tgz d5 && rm -rf d5
