#!/usr/bin/env bash
# Session 30, call j2 (H100, Nsight Compute): SM cycles of one launch (median of 3) of the
# heuristic's pick, 128x256 with 4 stages and warp staging (sharing B / no cluster) and
# DeepGEMM 54e2261 on the same inputs (bench.kernel_cycles), dense and contiguous.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/j2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
say "kernel_cycles dense"
timeout -k 5 $(( $(left) - 120 )) python -m bench.kernel_cycles --launches 3 \
  --shape 4096,4096,7168 --shape 4096,7168,16384 --shape 4096,7168,2048 --shape 4096,5120,8192 \
  --shape 1024,16384,6656 --shape 8192,4096,8192 \
  --config heuristic --config 128x256x3/mc1 --config 128x256x4/mc2b --config 128x256x4/mc1 \
  --json $o/cy.json > $o/cy.txt 2>&1
echo "rc $?"; grep -v '^==' $o/cy.txt | tail -40
say "kernel_cycles contiguous"
timeout -k 5 $(left) python -m bench.kernel_cycles --launches 3 --groups 8 --shape 1024,6144,16384 \
  --config heuristic --config 128x256x4/mc2b --config 128x256x4/mc1 --config 128x192x4/mc2b \
  --json $o/cg.json > $o/cg.txt 2>&1
echo "rc $?"; grep -v '^==' $o/cg.txt | tail -10
say done
cd $OUT && tar czf j2.tgz j2 && rm -rf j2
