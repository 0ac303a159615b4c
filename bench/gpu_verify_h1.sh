#!/usr/bin/env bash
# GPU verification of host path h1 (bench/NOTES.md, "Host path h1"), in one device call.
# Run from the device copy's repository root, which is /work/main's tree (main's dgemm), with
# this branch rsynced to .wt-hot-path/ and the bench kernels prewarmed into
# .wt-hot-path/.kcache (NOTES gives the local commands):
#     bash .wt-hot-path/bench/gpu_verify_h1.sh [tests|bench|all]      (default all)
# tests: the hot path's, CUDA graphs' and runtime's GPU tests of the branch (each test gets a
#        fresh cache dir from tests/conftest.py, so they compile what they need).
# bench: bench_call twice each for main and the branch, alternating, every process also
#        timing cuBLAS-blk and DeepGEMM 54e2261 (built from .anchors while the tests run);
#        both processes run this branch's bench code, so only dgemm differs.
set -uo pipefail
what=${1:-all}
root=$PWD
wt=$root/.wt-hot-path
out=${OUT:-/tmp/h1-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

if [ "$what" != tests ]; then
  (bash "$root/.anchors/setup_deepgemm.sh" > /tmp/dg_env 2> "$out/deepgemm_setup.err") &
  dg_pid=$!
fi

status=0
if [ "$what" != bench ]; then
  (cd "$wt" && PYTHONPATH="$wt" timeout 480 python -m pytest -q -p no:cacheprovider -rs \
     tests/gpu/test_hot_path.py tests/gpu/test_cuda_graphs.py tests/gpu/test_runtime.py) \
    > "$out/gpu_tests.txt" 2>&1
  status=$?
  tail -25 "$out/gpu_tests.txt"
fi

if [ "$what" != tests ]; then
  wait "$dg_pid" && . /tmp/dg_env || echo "DeepGEMM did not build: its columns are left out"
  export DGEMM_CACHE_DIR="$wt/.kcache"         # the prewarmed bench kernels (both trees:
  rm -rf /tmp/h1-bench && mkdir -p /tmp/h1-bench  # csrc is the same, so the keys are too)
  cp -r "$wt/bench" /tmp/h1-bench/
  for round in 1 2; do
    # cwd /tmp/h1-bench: `bench` from the branch, `dgemm` from main's tree (the root).
    (cd /tmp/h1-bench && PYTHONPATH="/tmp/h1-bench:$root" python -m bench.bench_call \
       --json "$out/main_$round.json") 2>&1 | tee "$out/bench_main_$round.txt"
    (cd "$wt" && PYTHONPATH="$wt" python -m bench.bench_call --json "$out/branch_$round.json") \
      2>&1 | tee "$out/bench_branch_$round.txt"
  done
fi
exit $status
