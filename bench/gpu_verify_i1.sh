#!/usr/bin/env bash
# GPU verification of the integration of hot-path (h2 kernel + host path), warm-up bench and
# training t0 (bench/NOTES.md, "Integration i1"), in one device call. Run from the device
# copy's repository root (/work/main's tree: main's dgemm, the v24 kernel) with this tree
# copied to .wt-int/ and the DeepSeek-V3 preset prewarmed for both trees into .wt-int/.kcache:
#     bash .wt-int/bench/gpu_verify_i1.sh [MODES]      MODES comma-separated: tests,call,ab
# tests: the drop-in's, CUDA graphs' (torch.compile included), hot path's and scale layouts'
#        GPU tests of this tree (each test compiles into its own fresh cache).
# call:  bench_call (per-call µs at M=64: pre, row-major, d=None, grouped; cuBLAS-blk and
#        DeepGEMM 54e2261 in the same process), then bench.call_parts.
# ab:    bench_gemm and bench_grouped on the DeepSeek-V3 shapes, main's tree (v24 kernel) and
#        this tree (h2: A scales loaded by a cp.async warp) in alternating processes, each
#        with DeepGEMM in the same process; each tree runs its own bench code.
# Everything ends inside I1_BUDGET_S (default 560 s); logs and JSON are packed into $OUT/i1.tgz
# at the end (the device tool returns at most 8 files).
set -uo pipefail
modes=${1:-tests,call,ab}
budget=${I1_BUDGET_S:-560}
started=$SECONDS
root=$PWD
wt=${I1_TREE:-$root/.wt-int}    # the tree under test (I1_TREE=$PWD: the checkout itself)
out=/tmp/i1-out
mkdir -p "$out"
want() { case ",$modes," in *",$1,"*) return 0;; esac; return 1; }
left() { echo $(( budget - (SECONDS - started) )); }
limit() { local cap=$1 t; t=$(left); (( t > cap )) && t=$cap; (( t < 5 )) && t=5; echo "$t"; }
say() { echo "== [$(( SECONDS - started ))s] $*" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

if want call || want ab; then
  (bash "$root/.anchors/setup_deepgemm.sh" > /tmp/dg_env 2> "$out/deepgemm_setup.err") &
  dg_pid=$!
fi
status=0
if want tests; then
  say "tests"
  (cd "$wt" && PYTHONPATH="$wt" timeout -k 5 "$(limit 200)" python -m pytest -q \
     -p no:cacheprovider -rs tests/gpu/test_compat_gpu.py tests/gpu/test_cuda_graphs.py \
     tests/gpu/test_hot_path.py tests/gpu/test_scale_layouts.py) > "$out/gpu_tests.txt" 2>&1 \
    || status=1
  tail -15 "$out/gpu_tests.txt"
fi
if want call || want ab; then
  wait "$dg_pid" && . /tmp/dg_env || say "DeepGEMM did not build: its columns are left out"
  export DGEMM_CACHE_DIR="$wt/.kcache"
fi
if want call; then
  say "bench_call"
  (cd "$wt" && PYTHONPATH="$wt:${PYTHONPATH:-}" timeout -k 5 "$(limit 90)" \
     python -m bench.bench_call --json "$out/call.json") > "$out/call.txt" 2>&1 || status=1
  cat "$out/call.txt"
  say "call_parts"
  (cd "$wt" && PYTHONPATH="$wt:${PYTHONPATH:-}" timeout -k 5 "$(limit 60)" \
     python -m bench.call_parts) > "$out/call_parts.txt" 2>&1 || status=1
  cat "$out/call_parts.txt"
fi
if want ab; then
  # tree label, its root: every process imports dgemm and bench from that tree.
  run_bench() {   # $1 bench module, $2 label, $3 tree, $4 suffix, $5 cap
    say "$1 $2 $4"
    (cd "$3" && PYTHONPATH="$3:${PYTHONPATH:-}" timeout -k 5 "$(limit "$5")" python -m "bench.$1" \
       --suite deepseek_v3 --rounds 3 --json "$out/${1}_${2}_$4.json") \
      > "$out/${1}_${2}_$4.txt" 2>&1
    grep -i "geomean\|fit\|held" "$out/${1}_${2}_$4.txt" | tail -6
  }
  run_bench bench_gemm v24 "$root" 1 150
  run_bench bench_gemm h2 "$wt" 1 100
  run_bench bench_grouped v24 "$root" 1 100
  run_bench bench_grouped h2 "$wt" 1 100
  (( $(left) > 80 )) && run_bench bench_gemm v24 "$root" 2 60
  (( $(left) > 70 )) && run_bench bench_gemm h2 "$wt" 2 60
fi
say "done"
[ -n "${OUT:-}" ] && tar czf "$OUT/i1.tgz" -C /tmp i1-out
exit $status
