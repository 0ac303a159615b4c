#!/usr/bin/env bash
# Session 34, call n1 (H100): SM cycles of the pipelined chain's two ways to hold fewer stages,
# against DeepGEMM 54e2261 in the same call: an odd ring (13 stages at 64x64, allowed now) and
# .exp/bprime (each K block waits for the previous one's WGMMAs and hands its stage back before
# it waits for its own data, instead of after).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/n1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
left() { echo $(( 585 - (SECONDS - t0) )); }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
B="$PWD/.exp/bprime"
kc() { local tag=$1; shift; say "kernel_cycles $tag"
  timeout -k 5 $(left) python -m bench.kernel_cycles --launches 5 "$@" --json $o/$tag.json > $o/$tag.txt 2>&1
  echo "rc $?"; grep -v '^==' $o/$tag.txt | grep -v '^precompiled' | tail -60; }
kc a --shape 128,4096,7168 --shape 128,4096,4096 \
  --config heuristic --config 64x64x13 --config "heuristic@$B" --config "64x64x13@$B"
kc b --shape 64,7168,2048 --shape 128,2112,7168 --shape 64,4096,16384 --shape 16,16384,2048 \
  --shape 48,9216,4096 --shape 64,6144,4096 --config heuristic --config "heuristic@$B"
kc c1 --shape 64,7168,2048 --config 64x56x14 --config "64x56x14@$B"
kc c2 --shape 128,2112,7168 --config 64x32x16 --config "64x32x16@$B"
kc c3 --shape 64,6144,4096 --config 64x48x15 --config "64x48x15@$B"
say done
