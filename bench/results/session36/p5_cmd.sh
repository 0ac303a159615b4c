#!/usr/bin/env bash
# Session 36, call p5 (H100): .exp/mcast0 = DeepGEMM's cluster load split. A cluster's shared
# tile (A or B) is multicast whole by rank 0 (both slices) instead of one slice per rank, and
# a cluster sharing A multicasts A's scales from rank 0 too (each rank loaded its own). First
# the cluster GPU tests on that tree, then ncu counters (L2 read sectors from the SMs, L2 and
# DRAM bytes) against the packaged tree and DeepGEMM: does the L2 read count fall to DeepGEMM's?
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p5; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
rm -rf .kcache && tar xzf .kcache.tgz
export DGEMM_CACHE_DIR=$PWD/.kcache
( bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err ) &
dg=$!
x=$PWD/.exp/mcast0/csrc
say "cluster tests on mcast0"
DGEMM_CSRC_DIR=$x timeout -k 5 240 python -m pytest -q -x tests/gpu/test_hopper_gemm.py \
  -k "cluster or 256_row_tiles_sharing" > $o/tests.txt 2>&1
echo "rc $?"; tail -3 $o/tests.txt
wait $dg; . /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "kernel_cycles"
timeout -k 5 $(left) python -m bench.kernel_cycles --shape 4096,4096,7168 \
  --shape 4096,36864,7168 --config 256x128/mc2a --config 256x128/mc2a@$x \
  --config 128x256/mc2b --config 128x256/mc2b@$x --launches 1 \
  --metric lts__t_sectors_srcunit_tex_op_read.sum --metric lts__t_bytes.sum \
  --metric dram__bytes_read.sum --json $o/cycles.json > $o/cycles.txt 2>&1
echo "rc $?"; grep -v "^==PROF==" $o/cycles.txt | grep -vE "^\s*$|precompiled" | sed "s#$x#M0#" | tail -40
say done
