#!/bin/bash
# Call 2: fault map of tile widths (pre-refusal code in hunt/), sanitizer on a faulting config;
# then the cost model's candidates beside the (capped) heuristic on every suite, same rounds.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(bash ../.anchors/setup_deepgemm.sh > /tmp/dgenv.sh 2> /tmp/dgsetup.err; t "DeepGEMM build done") &
export PYTHONPATH=$PWD
C="--candidates 3"
python -m bench.bench_gemm $C --precompile-only 2>&1 | tail -1
python -m bench.bench_gemm --suite broad $C --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped $C --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped --suite broad $C --precompile-only 2>&1 | tail -1
t precompiled; wait; source /tmp/dgenv.sh
Q="masked:32x64:4096x7168"; D="dense:4x36864x7168"
(cd hunt && export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} &&
 timeout 200 python -m bench.probe_configs --jobs 4 --calls 10 --rounds 25 \
  $Q:64x96x10/mc1 $Q:64x112x8/mc1 $Q:64x120x8/mc1 $Q:64x128x8/mc1 $Q:64x136x8/mc1 \
  $Q:64x144x7/mc1 $Q:64x160x7/mc1 $Q:64x192x6/mc1 $Q:128x160x5/mc1 $Q:128x192x4/mc1 \
  $D:64x120x8/mc1 $D:64x128x8/mc1 $D:64x136x8/mc1 $D:64x192x6/mc1 $D:128x160x5/mc1 $D:128x192x4/mc1 \
  2>&1 | tee $OUT/hunt2.log
 t "plain calls (no profiler), 3000 flushed"
 timeout 90 python -m bench.probe_configs --jobs 2 --calls 3000 --flush $Q:64x160x7/mc1 $D:64x144x7/mc1 2>&1 | tee -a $OUT/hunt2.log
 t memcheck
 timeout 150 compute-sanitizer --tool memcheck --report-api-errors no python -m bench.probe_configs --one $D:64x160x7/mc1 --calls 3 > $OUT/sanitizer.log 2>&1; tail -4 $OUT/sanitizer.log
 t racecheck
 timeout 120 compute-sanitizer --tool racecheck --report-api-errors no python -m bench.probe_configs --one dense:4x4608x7168:64x160x7/mc1 --calls 1 >> $OUT/sanitizer.log 2>&1; tail -6 $OUT/sanitizer.log)
t hunted
loop() {  # name, deadline (s since T0), bench module, args...
  local name=$1 deadline=$2; shift 2
  for i in $(seq 1 10); do
    local left=$(( deadline - ($(date +%s) - T0) )); [ $left -lt 15 ] && { echo "$name: out of time"; break; }
    timeout $left python -m "$@" --json $OUT/$name.json --resume >> $OUT/$name.log 2>&1; local rc=$?
    [ $rc -ne 3 ] && [ $rc -ne 134 ] && [ $rc -ne 139 ] && break
  done
  grep -h "FAILED\|CUDA fault" $OUT/$name.log | cut -c1-250
}
t dense_broad;   loop cand_dense_broad 470 bench.bench_gemm --suite broad $C
t dense_ds;      loop cand_dense_ds 500 bench.bench_gemm $C --rounds 3 --iters 10
t grouped;       loop cand_grouped 585 bench.bench_grouped --suite broad $C
t end
grep -h "^\[" $OUT/cand_dense_broad.log $OUT/cand_dense_ds.log | tail -5
grep -h "^\[" $OUT/cand_grouped.log | tail -6
