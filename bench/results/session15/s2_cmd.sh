#!/usr/bin/env bash
# Session 15, call s2 (H200): (1) issue 13 after s1's fix (cached calls skip the C hot path
# while torch.compile traces): the host-path GPU tests again, bench_call DGEMM_NATIVE=0/1/0/1
# and call_parts; (2) issue 12 probe: a one-warpgroup 64-row tile (ignored csrc copy
# .exp/onewg: warpgroup 0 takes every K block, warpgroup 1 idles) against main's split-K
# 64-row tile, the heuristic's pick and DeepGEMM, with compare_tiles (same rounds), and
# memcheck of the probe's kernel.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
(bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err) &
dg=$!
say "gpu tests (C path)"
timeout -k 5 150 python -m pytest -q -p no:cacheprovider -rs tests/gpu/test_hot_path.py \
  tests/gpu/test_cuda_graphs.py tests/gpu/test_compat_gpu.py tests/gpu/test_runtime.py \
  > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
wait $dg; . /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
for run in 1 2; do
  for nat in 0 1; do
    say "bench_call DGEMM_NATIVE=$nat run $run"
    DGEMM_CACHE_DIR=$PWD/.kcache DGEMM_NATIVE=$nat timeout -k 5 100 python -m bench.bench_call \
      --json $o/call_n${nat}_$run.json > $o/call_n${nat}_$run.txt 2>&1
    echo "rc $?"; tail -4 $o/call_n${nat}_$run.txt
  done
done
say "call_parts"
DGEMM_CACHE_DIR=$PWD/.kcache timeout -k 5 60 python -m bench.call_parts > $o/call_parts.txt 2>&1
cat $o/call_parts.txt
if [ -d .exp/onewg ]; then
  w=.exp/onewg
  for shape in 128,4096,7168 128,4096,4096 64,6144,4096 64,4096,7168 128,2112,7168 256,7168,2048; do
    say "onewg $shape"
    timeout -k 5 100 python $w/run_compare.py --shape $shape --rounds 5 --config heuristic \
      --config 64x64 --config 64x64@$w --config 64x64x13@$w --config 64x128@$w --config 64x32@$w \
      --json $o/onewg_${shape//,/x}.json > $o/onewg_${shape//,/x}.txt 2>&1
    echo "rc $?"; tail -9 $o/onewg_${shape//,/x}.txt
  done
  say "memcheck onewg"
  san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
  timeout -k 5 120 $san --tool memcheck --report-api-errors no python $w/run_compare.py \
    --shape 200,4096,1024 --rounds 1 --config 64x64x5@$w --config 64x64x13/mc2a@$w > $o/memcheck_onewg.txt 2>&1
  echo "rc $?"; grep -E "ERROR SUMMARY|diff" $o/memcheck_onewg.txt | tail -4
fi
say done
cd $OUT && tar czf s2.tgz s2 && rm -rf s2
