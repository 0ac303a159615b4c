#!/usr/bin/env bash
# Session 10's closing GPU call (bench/NOTES.md): wgrad correctness and its table against
# DeepGEMM 54e2261 (the t0 script), the hot path's GPU tests and per-call table (h4), the
# training loss gap with its noise floor, and two cluster probes if time is left. From the
# repository root with .anchors/ and .kcache/ (t0 manifest + deepseek_v3 preset prewarmed).
set -uo pipefail
out=${OUT:-/tmp/s10-out}; mkdir -p "$out"
started=$SECONDS
say() { echo "== [$(( SECONDS - started ))s] $*"; }
OUT=$out/t0 T0_TREE=$PWD T0_BUDGET_S=${S10_T0_BUDGET_S:-110} bash bench/gpu_verify_t0.sh tests,bench \
  2>&1 | grep -vE "^GemmDesc" | tail -40
. /tmp/dg_env 2> /dev/null || true
export DGEMM_CACHE_DIR=$PWD/.kcache
say "hot-path GPU tests"
timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider -rs tests/gpu/test_hot_path.py \
  tests/gpu/test_compat_gpu.py tests/gpu/test_cuda_graphs.py tests/gpu/test_scale_layouts.py \
  > "$out/gpu_tests_hot.txt" 2>&1; tail -1 "$out/gpu_tests_hot.txt"
grep -E '^(FAILED|ERROR) ' "$out/gpu_tests_hot.txt" | head -10 | cut -c1-200
say "bench_call"
timeout -k 5 60 python3 -m bench.bench_call --json "$out/call.json" > "$out/call.txt" 2>&1
cat "$out/call.txt"
say "call_parts"
timeout -k 5 40 python3 -m bench.call_parts > "$out/call_parts.txt" 2>&1; tail -25 "$out/call_parts.txt"
say "train_fp8 --control"
timeout -k 5 90 python3 -m bench.train_fp8 --steps 120 --control --json "$out/train_fp8.json" \
  > "$out/train.txt" 2>&1; tail -3 "$out/train.txt" | cut -c1-1500
for tile in "$@"; do
  (( SECONDS - started > ${S10_BUDGET_S:-330} )) && { say "out of time before $tile"; break; }
  say "bench_wgrad --tile $tile --quick"
  timeout -k 5 40 python3 -m bench.bench_wgrad --quick --tile "$tile" \
    --json "$out/bench_wgrad_$tile.json" > "$out/bench_wgrad_$tile.txt" 2>&1
  grep -E "^geomean|WRONG|FAULT" "$out/bench_wgrad_$tile.txt"
done
say done
