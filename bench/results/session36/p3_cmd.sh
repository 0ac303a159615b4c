#!/usr/bin/env bash
# Session 36, call p3 (H100, ncu counters): where does DeepGEMM's own geometry (256x128 sharing
# A) lose 1..3% at the large rows (p1, p2: 0.967..0.976 at 4096x36864x7168, parity at
# 4096x4096x7168)? SM cycles plus DRAM bytes, L2 hit rate, L2 bytes, instructions and
# shared-memory wavefronts per launch, dgemm against DeepGEMM (bench.kernel_cycles --metric).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
rm -rf .kcache && tar xzf .kcache.tgz
export DGEMM_CACHE_DIR=$PWD/.kcache
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "kernel_cycles with metrics"
timeout -k 5 $(left) python -m bench.kernel_cycles --shape 4096,36864,7168 --shape 4096,4096,7168 \
  --shape 16384,1536,7168 --config 256x128/mc2a --config 192x128 --config 128x256/mc2b \
  --launches 2 --metric dram__bytes_read.sum --metric lts__t_sector_hit_rate.pct \
  --metric lts__t_bytes.sum --metric smsp__inst_executed.sum \
  --metric l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
  --json $o/cycles.json > $o/cycles.txt 2>&1
echo "rc $?"; grep -v "^==PROF==" $o/cycles.txt | tail -60
say done
