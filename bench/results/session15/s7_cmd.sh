#!/usr/bin/env bash
# Session 15, call s7 (H200): kernel s6's producer laps (tiles under 64x64 elements) against the
# same kernel without them (ignored copy .exp/nolaps: kProducerLaps = false), on the
# small-tile shapes, in the same rounds as DeepGEMM: s6's 64x6144x4096 (64x48) read 0.937
# against r4's 0.956, and 64x48 / 64x56 took the laps untested.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/s7; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err; . /tmp/dg_env
w=$PWD/.exp/nolaps
for shape in 64,6144,4096 64,7168,2048 64,7168,16384 64,4096,7168 64,2112,7168 128,2112,7168 1,6144,4096 4,9216,4096; do
  say "laps $shape"
  timeout -k 5 60 python -m bench.compare_tiles --shape $shape --rounds 7 --config heuristic \
    --config heuristic@$w --json $o/laps_${shape//,/x}.json > $o/laps_${shape//,/x}.txt 2>&1
  echo "rc $?"; tail -3 $o/laps_${shape//,/x}.txt
done
say done
cd $OUT && tar czf s7.tgz s7 && rm -rf s7
