#!/bin/bash
# Call 3 (the published run): tests/gpu and the v23 fault checks first (memcheck on the new
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
python -m bench.bench_gemm --precompile-only 2>&1 | tail -1
python -m bench.bench_gemm --suite broad --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped --precompile-only 2>&1 | tail -1
python -m bench.bench_grouped --suite broad --precompile-only 2>&1 | tail -1
t precompiled; wait $BUILD; source /tmp/dgenv.sh
Q="masked:32x64:4096x7168"; D="dense:4x36864x7168"; E="dense:23x7168x18432"; F="dense:64x6144x16384"
timeout 150 python -m bench.probe_configs --jobs 4 --calls 10 --rounds 25 \
  "$Q:heuristic+deepgemm+64x144x6/mc1+64x160x6/mc1+64x192x6/mc1" \
  "$D:heuristic+deepgemm+64x144x6/mc1+64x160x6/mc1" \
  "$E:heuristic+deepgemm+64x80x10/mc1+64x56x14/mc1+64x72x12/mc1" \
  "$F:heuristic+deepgemm+64x56x14/mc1+64x64x12/mc1+64x72x12/mc1" 2>&1 | tee $OUT/hunt3.log
timeout 100 python -m bench.probe_configs --jobs 3 --calls 3000 --flush $Q:64x160x6/mc1 $D:heuristic \
  masked:8x64:28672x4096:heuristic 2>&1 | tee -a $OUT/hunt3.log
echo "control, old kernel (K-parity ownership), even stages and even K blocks:" | tee -a $OUT/hunt3.log
(cd hunt && PYTHONPATH=$PWD timeout 60 python -m bench.probe_configs --jobs 1 --calls 3000 --flush $Q:64x160x6/mc1 2>&1 | tee -a $OUT/hunt3.log)
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
t dense_ds;      loop dense_ds $((B + 75)) bench.bench_gemm
t dense_broad;   loop dense_broad $((B + 160)) bench.bench_gemm --suite broad
t grouped;       loop grouped_ds $((B + 230)) bench.bench_grouped
                 loop grouped_broad $((B + 310)) bench.bench_grouped --suite broad
t benches done
LEFT=$(( 588 - ($(date +%s) - T0) ))
[ $LEFT -gt 20 ] && timeout $LEFT compute-sanitizer --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke > $OUT/memcheck.log 2>&1; tail -2 $OUT/memcheck.log
t end
for f in dense_ds dense_broad; do grep -h "^\[" $OUT/$f.log | tail -3; done
for f in grouped_ds grouped_broad; do grep -h "^\[" $OUT/$f.log | tail -6; done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
