#!/usr/bin/env bash
# Session 14, call r3 (H200): kernel r2 — the TMA producer of the grouped layouts takes the tile
# the loader warp staged (with whether a contiguous pair shares B) instead of reading group
# indices itself at every tile. GPU tests of the grouped layouts and memcheck of the sanitizer
# smoke; A/B of kernel r1 (.exp/r1) against r2 in the same rounds as DeepGEMM; the contiguous
# DeepSeek-V3 table with 128x192 and 128x256 clusters swept beside the pick; a probe of 2-CTA
# clusters sharing A on the dense shapes below 0.95 (which never had them timed).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/r3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "gpu tests"
timeout -k 5 150 python -m pytest -q tests/gpu/test_hopper_gemm.py -k "contiguous or masked or grouped" \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt
say "memcheck"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
timeout -k 5 100 $san --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke \
  > $o/memcheck.txt 2>&1
echo "rc $?"; grep -E "ERROR SUMMARY" $o/memcheck.txt
wait
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 570 - (SECONDS - t0) )); }
R1=$PWD/.exp/r1
say "A/B r1 -> r2 contiguous"
timeout -k 5 100 python -m bench.compare_tiles --groups 4 --shape 8192,4096,7168 \
  --config 128x256x3/mc2b@$R1 --config 128x256x3/mc2b --json $o/c4.json > $o/c4.txt 2>&1
echo "rc $?"; grep -vi warn $o/c4.txt | tail -4
timeout -k 5 100 python -m bench.compare_tiles --groups 8 --shape 4096,7168,2048 \
  --config 128x256x3@$R1 --config 128x256x3 --json $o/c8.json > $o/c8.txt 2>&1
echo "rc $?"; grep -vi warn $o/c8.txt | tail -4
say "contiguous DeepSeek-V3 with sweeps"
timeout -k 5 150 python -m bench.bench_grouped --suite deepseek_v3 --layout contiguous \
  --sweep 128x192/mc2b,128x256/mc2b,128x256 --json $o/g_ds.json > $o/g_ds.txt 2>&1
echo "rc $?"; grep -E "^\[|^contiguous" $o/g_ds.txt
say "dense probe: clusters sharing A"
timeout -k 5 $(left) python -m bench.compare_tiles --shape 128,4096,7168 --config heuristic \
  --config 64x64/mc2a --config 128x32/mc2a --config 64x64 --shape 384,4096,8192 \
  --config 128x96/mc2a --shape 200,10240,8192 --config 128x160/mc2a --json $o/d.json \
  > $o/d.txt 2>&1
echo "rc $?"; grep -vi warn $o/d.txt | tail -24
say done
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
