#!/usr/bin/env bash
# Session 36, call p4 (H100, ncu counters): p3 found 256x128 sharing A moving 4.7..7.1% more
# L2 bytes (lts__t_bytes) than DeepGEMM's identical tile, same DRAM bytes at 4096x4096x7168.
# Which L2 traffic: reads or writes (op), from the SMs or across the L2 fabric (srcunit)?
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p4; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 590 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
rm -rf .kcache && tar xzf .kcache.tgz
export DGEMM_CACHE_DIR=$PWD/.kcache
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
run() {   # name, metrics...
  local name=$1; shift; local m=""; for x in "$@"; do m="$m --metric $x"; done
  say "kernel_cycles $name"
  timeout -k 5 $(left) python -m bench.kernel_cycles --shape 4096,4096,7168 \
    --shape 4096,36864,7168 --config 256x128/mc2a --launches 1 $m \
    --json $o/$name.json > $o/$name.txt 2>&1
  echo "rc $?"; grep -v "^==PROF==" $o/$name.txt | grep -vE "^\s*$|precompiled" | tail -30
}
run ops lts__t_sectors_op_read.sum lts__t_sectors_op_write.sum lts__t_sectors_op_red.sum \
  lts__t_sectors_op_atom.sum
run src lts__t_sectors_srcunit_tex.sum lts__t_sectors_srcunit_ltcfabric.sum \
  lts__t_sectors_srcunit_tex_op_read.sum lts__t_sectors_srcunit_tex_op_write.sum
say done
