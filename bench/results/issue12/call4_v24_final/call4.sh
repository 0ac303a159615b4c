#!/bin/bash
# Call 4 (the published run, kernel v24): tests/gpu and the v23 fault checks first (memcheck on the new
# split-K ownership, the configs that faulted before v23, a control on the old kernel), then the
# final heuristic vs DeepGEMM 54e2261 vs cuBLAS-blk on every suite, same rounds.
cd "$(dirname "$0")"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,temperature.gpu,driver_version --format=csv,noheader
(bash ../.anchors/setup_deepgemm.sh > /tmp/dgenv.sh 2> /tmp/dgsetup.err; t "DeepGEMM build done") &
BUILD=$!
(timeout 300 python -m pytest -q tests/gpu -p no:cacheprovider > $OUT/tests_gpu.log 2>&1; t "tests/gpu rc=$?") &
TESTS=$!
python -m bench.bench_gemm --picks results/picks_v23.json --precompile-only 2>&1 | tail -1
python -m bench.bench_gemm --suite broad --picks results/picks_v23.json --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped --suite broad --precompile-only 2>&1 | tail -1
t precompiled; wait $BUILD; source /tmp/dgenv.sh
timeout 120 python -m bench.probe_configs --jobs 4 --calls 1000 --flush dense:200x10240x8192:heuristic \
  dense:4x8192x29568:heuristic dense:129x2304x16384:heuristic dense:1000x2112x7168:192x128x4/mc2a \
  dense:200x51200x5120:128x256x3/mc2b dense:7x4096x7168:heuristic+deepgemm \
  masked:32x64:4096x7168:heuristic masked:8x64:28672x4096:heuristic 2>&1 | tee $OUT/hunt4.log
t hunted; wait $TESTS; tail -3 $OUT/tests_gpu.log
B=$(( $(date +%s) - T0 ))
loop() {  # name, deadline (s since T0), bench module, args...
  local name=$1 deadline=$2; shift 2
  for i in $(seq 1 10); do
    local left=$(( deadline - ($(date +%s) - T0) )); [ $left -lt 15 ] && { echo "$name: out of time"; break; }
    timeout $left python -m "$@" --json $OUT/$name.json --resume >> $OUT/$name.log 2>&1; local rc=$?
    [ $rc -ne 3 ] && [ $rc -ne 134 ] && [ $rc -ne 139 ] && break
  done
  grep -h "FAILED\|CUDA fault" $OUT/$name.log | cut -c1-250
}
t dense_ds;      loop dense_ds $((B + 85)) bench.bench_gemm --picks results/picks_v23.json
t dense_broad;   loop dense_broad $((B + 185)) bench.bench_gemm --suite broad --picks results/picks_v23.json
t grouped;       loop grouped_ds $((B + 255)) bench.bench_grouped
                 loop grouped_broad $((B + 335)) bench.bench_grouped --suite broad
t benches done
LEFT=$(( 588 - ($(date +%s) - T0) ))
[ $LEFT -gt 20 ] && timeout $LEFT compute-sanitizer --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke > $OUT/memcheck.log 2>&1; tail -2 $OUT/memcheck.log
t end
for f in dense_ds dense_broad; do grep -h "^\[" $OUT/$f.log | tail -3; done
for f in grouped_ds grouped_broad; do grep -h "^\[" $OUT/$f.log | tail -6; done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
