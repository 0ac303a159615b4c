#!/usr/bin/env bash
# Session 27, call g2 (H200): the deepest ring for 64-row tiles. num_stages takes the fewest
# stages that keep the deepest ring's round count (a rule from when each tile restarted the
# ring at stage 0) and an even count for the split-K warpgroups; since the ring runs on across
# tiles, a deeper ring only adds bytes in flight. compare_tiles: each tile at its current depth
# against its deepest (odd depths through .exp/odd: the kernel's even-count assert removed,
# stage ownership by parity unchanged; the Python check was disabled in the tree for this
# call), DeepGEMM 54e2261 (13 stages at 64x64) in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/g2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 570 - (SECONDS - t0) )); }
odd=@$PWD/.exp/odd/csrc
ct() { name=$1; shift; say "$name"
  timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 "$@" --json $o/$name.json > $o/$name.txt 2>&1
  echo "rc $?"
  grep -vE "Warn|warn" $o/$name.txt | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/'; }
ct a --shape 128,4096,2048 --shape 128,4096,4096 --shape 128,4096,7168 --shape 96,4096,7168 \
  --config 64x64 --config 64x64x12 --config "64x64x13$odd"
ct b --shape 64,7168,2048 --config 64x56 --config 64x56x14 --config 64x64 --config "64x64x13$odd"
ct c --shape 64,24576,1536 --config heuristic --config 64x96 --config 64x96x10 --config 64x192
ct d --shape 48,9216,4096 --config 64x72 --config 64x80 --config "64x80x11$odd" --config 64x96x10
ct e --shape 64,32768,512 --shape 128,32768,512 --config heuristic --config 64x128x8 --config 128x128x5 --config 64x96x10
say done
cd $OUT && tar czf g2.tgz g2 && rm -rf g2
