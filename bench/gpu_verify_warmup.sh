#!/usr/bin/env bash
# GPU run of the warm-up bench (bench/NOTES.md, "Warm-up bench w0") or of the drop-in's GPU
# tests, each in one device call. Run from the device copy's repository root (/work/main's tree)
# with this branch rsynced to .wt-warmup/ and .anchors/ carried:
#     bash .wt-warmup/bench/gpu_verify_warmup.sh tests [PYTEST ARGS...]
#     bash .wt-warmup/bench/gpu_verify_warmup.sh bench [BENCH_WARMUP OPTIONS...]  (default --quick)
# tests: tests/gpu/test_compat_gpu.py (plus any test files given), each test compiling its own
#        kernels (tests/conftest.py gives each a fresh cache).
# bench: DeepGEMM 54e2261 builds in the background at nice 19 (.anchors/setup_deepgemm.sh)
#        while dgemm's phases run ($WARMUP_DGEMM_PHASES, default dgemm-cold, prewarm,
#        dgemm-prewarmed, dgemm-warm); then DeepGEMM's phases ($WARMUP_DEEPGEMM_PHASES, default
#        deepgemm-cold, deepgemm-warm; empty: no DeepGEMM, no build) are appended to the same
#        $OUT/warmup.json. Everything fits in $WARMUP_BUDGET seconds (default 540) from the
#        start: bench_warmup gives each phase what is left (a phase stopped there keeps its
#        partial result) and skips what cannot start; each dgemm phase is also capped at
#        $WARMUP_DGEMM_TIMEOUT seconds (default 240; options given after `bench` override it),
#        so that one stuck phase leaves DeepGEMM its time.
# Outputs in $OUT: gpu.txt, warmup.json, bench_dgemm.txt, bench_deepgemm.txt, phase_logs.tgz
# (the phases' logs, manifest and prewarm report), deepgemm_setup.err, gpu_tests.txt.
set -uo pipefail
mode=${1:-}
shift || true
root=$PWD
wt=${WARMUP_TREE:-$root/.wt-warmup}
out=${OUT:-/tmp/warmup-out}
budget=${WARMUP_BUDGET:-540}
dgemm_phases=${WARMUP_DGEMM_PHASES-dgemm-cold,prewarm,dgemm-prewarmed,dgemm-warm}
deepgemm_phases=${WARMUP_DEEPGEMM_PHASES-deepgemm-cold,deepgemm-warm}
dgemm_timeout=${WARMUP_DGEMM_TIMEOUT:-240}
work=/tmp/dgemm-warmup-bench
start=$SECONDS
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

left() { echo $((budget - (SECONDS - start))); }

case "$mode" in
tests)
  (cd "$wt" && PYTHONPATH="$wt" timeout "$(left)" python3 -m pytest -q -p no:cacheprovider -rs \
     tests/gpu/test_compat_gpu.py "$@") > "$out/gpu_tests.txt" 2>&1
  status=$?
  tail -40 "$out/gpu_tests.txt"
  exit $status
  ;;
bench)
  [ $# -eq 0 ] && set -- --quick
  if [ -n "$deepgemm_phases" ]; then
    (nice -n 19 bash "$root/.anchors/setup_deepgemm.sh" > /tmp/dg_env \
       2> "$out/deepgemm_setup.err") &
    dg_pid=$!
  fi
  cd "$wt" || exit 1
  export PYTHONPATH="$wt"
  status=0
  if [ -n "$dgemm_phases" ]; then
    timeout $(($(left) + 30)) python3 -m bench.bench_warmup --timeout "$dgemm_timeout" "$@" \
      --only "$dgemm_phases" \
      --budget "$(left)" --work-dir "$work" --json "$out/warmup.json" \
      2>&1 | tee "$out/bench_dgemm.txt"
    status=$?
  fi
  if [ -n "$deepgemm_phases" ]; then
    if kill -0 "$dg_pid" 2>/dev/null; then
      echo "$(date +%T) DeepGEMM's build (nice 19) still running; waiting ($(left) s left)"
    else
      echo "$(date +%T) DeepGEMM's build had finished during dgemm's phases"
    fi
    if wait "$dg_pid"; then
      . /tmp/dg_env
      append=$([ -f "$out/warmup.json" ] && echo --append)
      if [ "$(left)" -gt 15 ]; then
        timeout $(($(left) + 30)) python3 -m bench.bench_warmup "$@" --only "$deepgemm_phases" \
          --budget "$(left)" --work-dir "$work" --json "$out/warmup.json" $append \
          2>&1 | tee "$out/bench_deepgemm.txt"
        [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
      else
        echo "no time left in WARMUP_BUDGET=$budget for DeepGEMM's phases"; status=1
      fi
    else
      echo "DeepGEMM did not build; its phases did not run:"
      tail -5 "$out/deepgemm_setup.err"; tail -20 /tmp/deepgemm/build.log 2>/dev/null
      status=1
    fi
  fi
  tar czf "$out/phase_logs.tgz" -C "$work" phases 2>/dev/null
  echo "$(date +%T) done in $((SECONDS - start)) s"
  exit $status
  ;;
*)
  echo "usage: bash .wt-warmup/bench/gpu_verify_warmup.sh tests|bench [ARGS...]" >&2
  exit 2
  ;;
esac
