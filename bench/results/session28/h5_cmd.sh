#!/usr/bin/env bash
# Session 28, call h5 (H200): main's kernel (session 27's, two-round hand-over) under memcheck
# and synccheck on the sanitizer smoke, which now also runs 64-row chain pairs (9 and 56 K
# blocks); the pair kernel's GPU tests.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/h5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
for tool in memcheck synccheck; do
  say "$tool"
  timeout -k 5 150 $san --tool $tool --report-api-errors no python -m bench.sanitizer_smoke \
    > $o/$tool.txt 2>&1; echo "rc $?"; grep -E "ERROR SUMMARY" $o/$tool.txt
  grep -E "^dense (100 328 1152|70 120 7168)" $o/$tool.txt | sort | uniq -c
done
say done
cd $OUT && tar czf h5.tgz h5 && rm -rf h5
