#!/usr/bin/env bash
# GPU verification of host path h1 (bench/NOTES.md, "Host path h1"), in one device call.
# Run from the device copy's repository root, which is /work/main's tree (main's dgemm), with
# this branch rsynced to .wt-hot-path/ and the bench kernels prewarmed into
# .wt-hot-path/.kcache (NOTES gives the local commands):
#     bash .wt-hot-path/bench/gpu_verify_h1.sh [tests|bench|all]      (default all)
# tests: the hot path's, CUDA graphs', runtime's, scale layouts' and the sm_90a and portable
#        kernels' GPU tests of the branch (each test gets a fresh cache dir from
#        tests/conftest.py, so they compile what they need).
# bench: bench_call twice each for main and the branch, alternating, every process also
#        timing cuBLAS-blk and DeepGEMM 54e2261 (built from .anchors while the tests run);
#        both processes run this branch's bench code, so only dgemm differs.
# kernels: bench_gemm and bench_grouped on the DeepSeek-V3 shapes against DeepGEMM (the kernel
#        changed in h2: its A-scale loader), from the prewarmed cache.
set -uo pipefail
what=${1:-all}
case $what in
  tests) run_tests=1 run_call=0 run_kernels=0 ;;
  bench) run_tests=0 run_call=1 run_kernels=0 ;;
  kernels) run_tests=0 run_call=0 run_kernels=1 ;;
  all) run_tests=1 run_call=1 run_kernels=1 ;;
  *) echo "usage: $0 [tests|bench|kernels|all]" >&2; exit 2 ;;
esac
root=$PWD
wt=$root/.wt-hot-path
out=${OUT:-/tmp/h1-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

if [ $run_call = 1 ] || [ $run_kernels = 1 ]; then
  (bash "$root/.anchors/setup_deepgemm.sh" > /tmp/dg_env 2> "$out/deepgemm_setup.err") &
  dg_pid=$!
fi

status=0
if [ $run_tests = 1 ]; then
  (cd "$wt" && PYTHONPATH="$wt" timeout 480 python -m pytest -q -p no:cacheprovider -rs \
     tests/gpu/test_hot_path.py tests/gpu/test_cuda_graphs.py tests/gpu/test_runtime.py \
     tests/gpu/test_scale_layouts.py tests/gpu/test_hopper_gemm.py tests/gpu/test_portable.py) \
    > "$out/gpu_tests.txt" 2>&1
  status=$?
  tail -25 "$out/gpu_tests.txt"
fi

if [ $run_call = 1 ] || [ $run_kernels = 1 ]; then
  wait "$dg_pid" && . /tmp/dg_env || echo "DeepGEMM did not build: its columns are left out"
  export DGEMM_CACHE_DIR="$wt/.kcache"     # prewarmed: main's and the branch's bench kernels
fi
if [ $run_call = 1 ]; then
  rm -rf /tmp/h1-bench && mkdir -p /tmp/h1-bench
  cp -r "$wt/bench" /tmp/h1-bench/
  for round in 1 2; do
    # cwd /tmp/h1-bench: `bench` from the branch, `dgemm` from main's tree (the root).
    (cd /tmp/h1-bench && PYTHONPATH="/tmp/h1-bench:$root:${PYTHONPATH:-}" python -m bench.bench_call \
       --json "$out/main_$round.json") 2>&1 | tee "$out/bench_main_$round.txt"
    (cd "$wt" && PYTHONPATH="$wt:${PYTHONPATH:-}" python -m bench.bench_call \
       --json "$out/branch_$round.json") \
      2>&1 | tee "$out/bench_branch_$round.txt"
  done
fi
if [ $run_kernels = 1 ]; then
  # The kernels after the A-scale loader change (h2), against DeepGEMM in the same processes.
  (cd "$wt" && PYTHONPATH="$wt:${PYTHONPATH:-}" timeout 300 python -m bench.bench_gemm \
     --suite deepseek_v3 --rounds 3 --json "$out/dense_ds.json") 2>&1 | tail -30
  (cd "$wt" && PYTHONPATH="$wt:${PYTHONPATH:-}" timeout 240 python -m bench.bench_grouped \
     --suite deepseek_v3 --rounds 3 --json "$out/grouped_ds.json") 2>&1 | tail -30
fi
exit $status
