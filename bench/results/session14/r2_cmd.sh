#!/usr/bin/env bash
# Session 14, call r2 (H200): kernel r1 as committed (r1 proper + loop shapes that keep the dense K loop's stage addresses uniform) — the B-scale loader warp stages each tile (coordinates,
# one bit per real output row) beside its B scales, so the math warpgroups read no global
# memory between tiles. GPU tests of the sm_90a GEMMs and memcheck of the sanitizer smoke, then
# an A/B of the old kernel (.exp/base: session 13's csrc with the same shared-memory plan) in
# the same rounds as the new one and DeepGEMM, then the grouped tables.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/r2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu tests"
timeout -k 5 200 python -m pytest -q tests/gpu/test_hopper_gemm.py tests/gpu/test_scale_layouts.py \
  tests/gpu/test_validation_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
say "memcheck"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
timeout -k 5 100 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 590 - (SECONDS - t0) )); }
B=$PWD/.exp/base
say "A/B contiguous"
timeout -k 5 120 python -m bench.compare_tiles --groups 8 --shape 4096,7168,2048 \
  --config 128x256x3@$B --config 128x256x3 --json $o/c8.json > $o/c8.txt 2>&1
echo "rc $?"; grep -vi warn $o/c8.txt | tail -5
timeout -k 5 120 python -m bench.compare_tiles --groups 4 --shape 8192,4096,7168 \
  --config 128x256x3/mc2b@$B --config 128x256x3/mc2b --json $o/c4.json > $o/c4.txt 2>&1
echo "rc $?"; grep -vi warn $o/c4.txt | tail -5
timeout -k 5 120 python -m bench.compare_tiles --groups 16 --shape 512,7168,2048 \
  --config 128x256x3@$B --config 128x256x3 --json $o/c16.json > $o/c16.txt 2>&1
echo "rc $?"; grep -vi warn $o/c16.txt | tail -5
say "A/B dense"
timeout -k 5 100 python -m bench.compare_tiles --shape 4096,4096,7168 --shape 128,4096,7168 \
  --config heuristic@$B --config heuristic --json $o/d.json > $o/d.txt 2>&1
echo "rc $?"; grep -vi warn $o/d.txt | tail -8
for suite in deepseek_v3 broad; do
  say "grouped $suite"
  timeout -k 5 $(left) python -m bench.bench_grouped --suite $suite --part all --control \
    --json $o/g_$suite.json > $o/g_$suite.txt 2>&1
  echo "rc $?"; grep -E "^\[" $o/g_$suite.txt
done
say done
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
