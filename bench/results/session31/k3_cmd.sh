#!/usr/bin/env bash
# Session 31, call k3 (H200): the broad suite's M = 16 dense rows (indices 21..32) twice, 7
# rounds, with the cost model's next 3 picks, DeepGEMM and cuBLAS-blk in the same rounds: is
# k2's 0.943 at 16x16384x2048 (1.029 in j5, 0.995 in session 29; pick unchanged) the timing's
# spread or the tile?
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/k3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
for rep in 1 2; do
  say "M = 16 rows, run $rep"
  timeout -k 5 $(( $(left) / (3 - rep) )) python -m bench.bench_gemm --suite broad \
    --only 21,22,23,24,25,26,27,28,29,30,31,32 --rounds 7 --candidates 3 \
    --json $o/m16_$rep.json > $o/m16_$rep.txt 2>&1
  echo "rc $?"; grep -E "^\[|16384 +2048" $o/m16_$rep.txt
done
say done
cd $OUT && tar czf k3.tgz k3 && rm -rf k3
