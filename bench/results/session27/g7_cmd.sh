#!/usr/bin/env bash
# Session 27, call g7 (H200): correctness of kernel g5 (64-row tiles of at most 8 K blocks run
# one chain) and autotuner method 6: the GPU tests of the forward kernels, the autotuner and the
# drop-in (test_wgrad_gpu.py and test_training_gpu.py left out: the weight-gradient kernel is
# unchanged), memcheck and synccheck of the sanitizer smoke; then the grouped broad table again
# (g6 read 0.933 at contiguous 8 x 1024, 6144x16384, an unchanged 128x256 tile that read
# 0.966..0.989 in sessions 24..26).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/g7; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
say "tests/gpu (forward)"
timeout -k 5 330 python -m pytest -q tests/gpu --ignore tests/gpu/test_wgrad_gpu.py \
  --ignore tests/gpu/test_training_gpu.py > $o/tests.txt 2>&1; echo "rc $?"; tail -3 $o/tests.txt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck; do
  say "$tool"
  timeout -k 5 60 $san --tool $tool --report-api-errors no python -m bench.sanitizer_smoke \
    > $o/$tool.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY" $o/$tool.txt
done
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "grouped broad"
timeout -k 5 $(left) python -m bench.bench_grouped --suite broad --part all \
  --json $o/g_broad.json > $o/g_broad.txt 2>&1
echo "rc $?"; grep -E "^\[" $o/g_broad.txt
say done
cd $OUT && tar czf g7.tgz g7 && rm -rf g7
