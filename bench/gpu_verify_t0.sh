#!/usr/bin/env bash
# GPU verification of training t0 (bench/NOTES.md, "training t0"), in one device call.
# Run from the device copy's repository root (/work/main's tree) with this branch copied to
# .wt-training/ and bench/t0_shapes.json prewarmed into .wt-training/.kcache (NOTES gives the
# local commands), carry=[".wt-training", ".anchors"]:
#     bash .wt-training/bench/gpu_verify_t0.sh [MODES]         MODES: comma-separated, default all
# tests:     pytest tests/gpu/test_wgrad_gpu.py + test_training_gpu.py (each test compiles into
#            its own fresh cache, as tests/conftest.py wants); compute-sanitizer memcheck on
#            bench.sanitizer_wgrad if the machine has compute-sanitizer (gVisor machines refuse
#            it: "Device not supported"); after bench and train, with what time is left, a
#            forward subset (8 test_hopper_gemm reference checks, test_cuda_graphs without
#            inductor: the merge of main) and racecheck on one wgrad call.
# bench:     bench.bench_wgrad (dense wgrad + k-grouped vs DeepGEMM 54e2261, built from .anchors
#            in the background from the start), JSON to $OUT.
# train:     bench.train_fp8 --steps 120 --control (FP8 vs BF16: loss gaps over the last 20,
#            max and of the means, with a perturbed-BF16 control as the noise floor; step times).
# ddp:       (2 GPUs) torchrun --nproc-per-node 2 bench.train_fp8 --ddp against a redis-server
#            (.wt-training/.redis, staged by bench/stage_redis.sh): rank 0 compiles, rank 1 must
#            show remote hits and no compiles. Skipped on one GPU.
# all:       tests,bench,train (about 7 minutes; each step's timeout shrinks to what is left of
#            T0_BUDGET_S, default 570 s, so the call ends inside run()'s 600 s).
# stdout keeps to short summaries (run() returns its last 12 KB); full logs and JSON in $OUT.
set -uo pipefail
modes=${1:-all}
[ "$modes" = all ] && modes=tests,bench,train
budget=${T0_BUDGET_S:-570}
started=$SECONDS
root=$PWD
wt=${T0_TREE:-$root/.wt-training}
out=${OUT:-/tmp/t0-out}
mkdir -p "$out"
for mode in ${modes//,/ }; do
  case $mode in tests|bench|train|ddp) ;; *) echo "unknown mode $mode (tests, bench, train, ddp, all)"; exit 2;; esac
done
want() { case ",$modes," in *",$1,"*) return 0;; esac; return 1; }
left() { echo $(( budget - (SECONDS - started) )); }
# A step's timeout: its cap, or what is left of the budget after `reserve` s for later steps.
limit() { local cap=$1 reserve=${2:-0} t; t=$(( $(left) - reserve )); (( t > cap )) && t=$cap
          (( t < 5 )) && t=5; echo "$t"; }
say() { echo "== [$(( SECONDS - started ))s] $*" | tee -a "$out/summary.txt"; }
status=0
fail() { say "FAILED: $*"; status=1; }

# What later steps need at least (s): a step's timeout leaves this much of the budget to them.
need() { local total=0 m
         for m in "$@"; do case $m in
           memcheck) want tests && total=$(( total + 60 ));;
           bench) want bench && total=$(( total + 180 ));;
           train) want train && total=$(( total + 90 ));;
         esac; done; echo $total; }

if [ "${T0_DRY_RUN:-0}" = 1 ]; then          # local check of the plumbing: print, run nothing
  say "dry run: modes=$modes budget=${budget}s root=$root out=$out"
  want tests && say "tests: wgrad tests $(limit 200 "$(need memcheck bench train)") s, memcheck $(limit 120 "$(need bench train)") s"
  want bench && say "bench: $(limit 300 "$(need train)") s"
  want train && say "train: $(limit 180) s"
  want tests && say "tests: forward subset and racecheck with what is left"
  want ddp && say "ddp: $(limit 240) s"
  exit 0
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
cd "$wt" || { echo "no $wt: copy the branch there first (bench/NOTES.md)"; exit 2; }
export PYTHONPATH="$wt"
python3 -c "import torch; p = torch.cuda.get_device_properties(0); print('torch', torch.__version__, '| gpus', torch.cuda.device_count(), '|', p.name, p.multi_processor_count, 'SMs')" | tee -a "$out/gpu.txt"
sanitizer=$(command -v compute-sanitizer || true)

if want bench; then        # DeepGEMM builds on the CPUs while the tests run
  (bash "$root/.anchors/setup_deepgemm.sh" > /tmp/dg_env 2> "$out/deepgemm_setup.err") &
  dg_pid=$!
fi

# The prewarmed kernels: the keys a GPU process asks for must be on disk (else it compiles
# them there, about a second each, and its `compiles` counter says so).
check_prewarm() {
  DGEMM_CACHE_DIR="$wt/.kcache" timeout 60 python3 -m dgemm.cli prewarm --manifest \
    bench/t0_shapes.json --arch sm_90a --num-sms 132 --dry-run --no-progress \
    > "$out/prewarm_dry_run.txt" 2>&1
  say "prewarm check: $(sed -n 2p "$out/prewarm_dry_run.txt" | sed 's/^ *//' | cut -c1-160)"
}

wgrad_tests() {
  say "tests: wgrad + training layers"
  timeout -k 10 "$(limit 200 "$(need memcheck bench train)")" python3 -m pytest -q \
    -p no:cacheprovider -rs --maxfail 15 tests/gpu/test_wgrad_gpu.py \
    tests/gpu/test_training_gpu.py > "$out/gpu_tests_wgrad.txt" 2>&1 \
    || fail "wgrad/training GPU tests (rc $?)"
  grep -E '^(FAILED|ERROR) ' "$out/gpu_tests_wgrad.txt" | head -15 | cut -c1-200
  tail -1 "$out/gpu_tests_wgrad.txt"
}

memcheck() {
  if [ -z "$sanitizer" ]; then say "sanitizer: compute-sanitizer not on PATH; skipped"; return; fi
  say "sanitizer: memcheck on bench.sanitizer_wgrad"
  DGEMM_CACHE_DIR="$wt/.kcache" timeout -k 10 "$(limit 120 "$(need bench train)")" \
    "$sanitizer" --tool memcheck --report-api-errors no python3 -m bench.sanitizer_wgrad \
    > "$out/sanitizer_memcheck.txt" 2>&1
  say "memcheck rc $?: $(grep -E 'ERROR SUMMARY|Device not supported' "$out/sanitizer_memcheck.txt" | tail -1)"
  grep -E '^(wgrad|k_grouped) ' "$out/sanitizer_memcheck.txt" | tr '\n' ';'; echo
}

racecheck() {
  [ -z "$sanitizer" ] && return
  say "sanitizer: racecheck on one dense call"
  DGEMM_CACHE_DIR="$wt/.kcache" timeout -k 10 "$(limit 90)" "$sanitizer" --tool racecheck \
    python3 -m bench.sanitizer_wgrad --dense-only > "$out/sanitizer_racecheck.txt" 2>&1
  say "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|Device not supported' "$out/sanitizer_racecheck.txt" | tail -1)"
}

forward_tests() {
  say "tests: forward subset (the merge: loader.loaded, the F.pad block cast, capture)"
  local t=tests/gpu/test_hopper_gemm.py
  timeout -k 10 "$(limit 90)" python3 -m pytest -q -p no:cacheprovider -rs \
    "$t::test_dense_gemm_matches_reference[4096-7168-2048]" \
    "$t::test_dense_gemm_matches_reference[1-576-7168]" \
    "$t::test_dense_gemm_matches_reference[129-2120-256]" \
    "$t::test_dense_gemm_matches_reference[33-4104-384]" \
    "$t::test_dense_gemm_matches_reference[4097-4096-1024]" \
    "$t::test_hopper_and_portable_kernels_agree" \
    "$t::test_contiguous_grouped_gemm_matches_reference[8x4096x7168x2048]" \
    "$t::test_masked_grouped_gemm_matches_reference[4x256x4096x7168]" \
    > "$out/gpu_tests_forward.txt" 2>&1 || fail "forward GPU tests (rc $?)"
  tail -1 "$out/gpu_tests_forward.txt"
  timeout -k 10 "$(limit 90)" python3 -m pytest -q -p no:cacheprovider -rs \
    tests/gpu/test_cuda_graphs.py -k "not inductor" > "$out/gpu_tests_graphs.txt" 2>&1 \
    || fail "CUDA graph GPU tests (rc $?)"
  tail -1 "$out/gpu_tests_graphs.txt"
}

bench() {
  while kill -0 "$dg_pid" 2> /dev/null && (( $(left) > 150 + $(need train) )); do sleep 2; done
  local dg_env=/tmp/dg_env
  if kill -0 "$dg_pid" 2> /dev/null; then
    kill "$dg_pid"; say "DeepGEMM still building with $(left) s left: dgemm timed alone"
    dg_env=/dev/null
  elif ! wait "$dg_pid"; then
    say "DeepGEMM did not build (deepgemm_setup.err, /tmp/deepgemm/build.log): dgemm timed alone"
    dg_env=/dev/null
  fi
  check_prewarm
  say "bench: bench_wgrad"
  (. "$dg_env"; DGEMM_CACHE_DIR="$wt/.kcache" timeout -k 10 "$(limit 300 "$(need train)")" \
     python3 -m bench.bench_wgrad --json "$out/bench_wgrad.json") > "$out/bench_wgrad.txt" 2>&1 \
    || fail "bench_wgrad (rc $?)"
  grep -vE '^(wgrad|k_grouped) ' "$out/bench_wgrad.txt" | tail -8 | cut -c1-400
  grep -E '^(wgrad|k_grouped) ' "$out/bench_wgrad.txt" | cut -c1-100
}

train() {
  want bench || check_prewarm
  say "train: train_fp8 FP8 vs BF16 (and a perturbed-BF16 control), 120 steps"
  DGEMM_CACHE_DIR="$wt/.kcache" timeout -k 10 "$(limit 180)" python3 -m bench.train_fp8 \
    --steps 120 --control --json "$out/train_fp8.json" > "$out/train_fp8.txt" 2>&1 \
    || fail "train_fp8 (rc $?)"
  tail -3 "$out/train_fp8.txt" | cut -c1-1200
}

ddp() {
  local gpus redis_bin redis_pid port=6399
  gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
  if (( gpus < 2 )); then say "ddp: $gpus GPU(s), needs 2: skipped"; return; fi
  redis_bin=$(command -v redis-server || echo "$wt/.redis/bin/redis-server")
  LD_LIBRARY_PATH="$wt/.redis/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$redis_bin" \
    --port $port --bind 127.0.0.1 --save '' --appendonly no > "$out/redis.txt" 2>&1 &
  redis_pid=$!
  sleep 1
  kill -0 "$redis_pid" 2> /dev/null || { fail "redis-server did not start: $(tail -2 "$out/redis.txt")"; return; }
  say "ddp: torchrun, 2 ranks, one redis-server, a fresh disk tier per rank"
  rm -rf /tmp/t0-rank0 /tmp/t0-rank1
  PYTHONPATH="$wt:$wt/.redis/py" DGEMM_REMOTE_CACHE="redis://127.0.0.1:$port/0" \
    timeout -k 10 "$(limit 240)" torchrun --nproc-per-node 2 -m bench.train_fp8 --ddp \
    --steps 100 --rank-cache-dir '/tmp/t0-rank{rank}' --json "$out/ddp_rank{rank}.json" \
    > "$out/ddp.txt" 2>&1 || fail "ddp (rc $?)"
  grep '^{' "$out/ddp.txt" | cut -c1-700
  kill "$redis_pid" 2> /dev/null
}

# Order: correctness, then the numbers, then what is best effort.
want tests && wgrad_tests
want tests && memcheck
want bench && bench
want train && train
want tests && forward_tests
want tests && racecheck
want ddp && ddp
say "done, status $status; logs and JSON in $out"
exit $status
