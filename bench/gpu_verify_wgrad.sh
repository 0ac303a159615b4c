#!/usr/bin/env bash
# wgrad kernel iteration on one GPU call (bench/NOTES.md, "wgrad v1/v2"): the t0 script's
# correctness (wgrad + training GPU tests, memcheck, racecheck) and bench_wgrad with the
# heuristic, then bench_wgrad with forced tiles (--tile) in the same machine, DeepGEMM 54e2261
# in every process. Run from the repository root with .anchors/ and the t0 manifest
# prewarmed into .kcache/:  bash bench/gpu_verify_wgrad.sh [TILE ...]   (e.g. 128x1 160x2a)
set -uo pipefail
out=${OUT:-/tmp/wgrad-out}
mkdir -p "$out"
started=$SECONDS
OUT=$out T0_TREE=$PWD T0_BUDGET_S=${WGRAD_T0_BUDGET_S:-300} bash bench/gpu_verify_t0.sh tests,bench
. /tmp/dg_env 2> /dev/null || true
for tile in "$@"; do
  (( SECONDS - started > ${WGRAD_BUDGET_S:-540} )) && { echo "== out of time before $tile"; break; }
  echo "== bench_wgrad --tile $tile"
  DGEMM_CACHE_DIR=$PWD/.kcache timeout -k 5 100 python3 -m bench.bench_wgrad --rounds 3 \
    --tile "$tile" --json "$out/bench_wgrad_$tile.json" > "$out/bench_wgrad_$tile.txt" 2>&1
  grep -E "^geomean" "$out/bench_wgrad_$tile.txt"
done
