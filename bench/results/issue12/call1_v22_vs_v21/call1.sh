#!/bin/bash
# Call 1: fault hunt on the configs that faulted in earlier runs; then v22 heuristic vs the old
# (v21) picks vs DeepGEMM vs cuBLAS-blk, same rounds: DeepSeek-V3 + broad, dense + grouped.
cd "$(dirname "$0")"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
(bash ../.anchors/setup_deepgemm.sh > /tmp/dgenv.sh 2> /tmp/dgsetup.err; t "DeepGEMM build done") &
PK="--picks results/picks_old.json"
python -m bench.bench_gemm $PK --precompile-only 2>&1 | tail -1
python -m bench.bench_gemm --suite broad $PK --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped $PK --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped --suite broad $PK --precompile-only 2>&1 | tail -1
t precompiled; wait; source /tmp/dgenv.sh; cat /tmp/dgsetup.err | tail -2
Q="masked:32x64:4096x7168"; R="masked:64x8:4096x7168"; D="dense:4x36864x7168"
SET="64x160x7/mc1+64x128x8/mc1+64x112x8/mc1+128x128x5/mc1"
timeout 170 python -m bench.probe_configs --jobs 4 --calls 10 --rounds 25 \
  "$Q:heuristic+deepgemm+$SET" "$Q:heuristic+$SET" "$Q:deepgemm" \
  "$R:heuristic+deepgemm+64x160x7/mc1+64x128x8/mc1+64x144x7/mc1+128x128x5/mc1" \
  "$D:heuristic+deepgemm+64x160x7/mc1+64x96x10/mc1+64x192x6/mc1+64x128x8/mc1" \
  "$Q:64x160x7/mc1" "$Q:64x128x8/mc1" "$Q:128x128x5/mc1" "$D:64x144x7/mc1" "$D:deepgemm" \
  2>&1 | tee $OUT/hunt.log
t hunted
loop() {  # name, deadline (s since T0), bench module, args...
  local name=$1 deadline=$2; shift 2
  for i in $(seq 1 10); do
    local left=$(( deadline - ($(date +%s) - T0) )); [ $left -lt 15 ] && { echo "$name: out of time"; break; }
    timeout $left python -m "$@" --json $OUT/$name.json --resume >> $OUT/$name.log 2>&1; local rc=$?
    [ $rc -ne 3 ] && [ $rc -ne 134 ] && break
  done
  grep -h "FAILED\|timing check\|CUDA fault" $OUT/$name.log | cut -c1-250
}
t dense_ds;      loop dense_ds 300 bench.bench_gemm $PK --rounds 3 --iters 10
t dense_broad;   loop dense_broad 450 bench.bench_gemm --suite broad $PK
t grouped;       loop grouped_ds 490 bench.bench_grouped $PK --rounds 3 --iters 10
                 loop grouped_broad 585 bench.bench_grouped --suite broad $PK
t end
for f in dense_ds dense_broad; do grep -h "^\[" $OUT/$f.log | tail -3; done
for f in grouped_ds grouped_broad; do grep -h "^\[\|geomean" $OUT/$f.log | tail -8; done
