#!/usr/bin/env bash
# Session 16, call w13 (H200): the autotuner timing kernels from the profiler's records (timer
# method 5; CUDA events only as a fallback): w12's probe, the GPU autotune tests, then w8's
# autotuning-on dense tables again (fresh cache directories: every class tuned in the run).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w13; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err &
say "probe"
DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 200 python -m bench.probe_tuner --shape 512,3072,4096 \
  --shape 4096,4096,7168 --shape 1024,5120,8192 > $o/probe.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/probe.txt | tail -20
say "gpu autotune tests"
timeout -k 5 150 python -m pytest -q tests/gpu/test_autotune_gpu.py > $o/tests.txt 2>&1
echo "rc $?"; tail -2 $o/tests.txt
wait
. /tmp/dg_env
left() { echo $(( 590 - (SECONDS - t0) )); }
for run in "deepseek_v3 all" "broad holdout"; do
  set -- $run
  say "dense $1 $2 autotune"
  DGEMM_CACHE_DIR=$(mktemp -d) timeout -k 5 $(left) python -m bench.bench_gemm --suite $1 \
    --part $2 --autotune --json $o/d_$1_$2.json > $o/d_$1_$2.txt 2>&1
  echo "rc $?"; grep -E "^\[|autotun" $o/d_$1_$2.txt | tail -4
done
say done
cd $OUT && tar czf w13.tgz w13 && rm -rf w13
