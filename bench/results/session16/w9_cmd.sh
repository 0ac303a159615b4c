#!/usr/bin/env bash
# Session 16, call w9 (H200): w8's autotuned 511x3072x4096 ran 128x128 at 0.872 of DeepGEMM while
# the heuristic's 128x96 ran 0.937 in the same rounds, though the tuner had timed 128x128 >= 2%
# faster at its class's edge, M = 512. Is it the M (511: the last m-block a 127-row tail) or the
# tuner's timing? Both tiles at M = 511 and 512 (and 4096x4096x7168 mc1/mc2b, w8's other
# disagreement), DeepGEMM 54e2261 in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/w9; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env
say "compare_tiles"
timeout -k 5 400 python -m bench.compare_tiles --rounds 8 --shape 511,3072,4096 \
  --shape 512,3072,4096 --shape 480,3072,4096 --config 128x128 --config 128x96 \
  --json $o/ct_511.json > $o/ct_511.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/ct_511.txt | tail -18
timeout -k 5 150 python -m bench.compare_tiles --rounds 6 --shape 4096,4096,7168 \
  --config 128x256 --config 128x256/mc2b --json $o/ct_4096.json > $o/ct_4096.txt 2>&1
echo "rc $?"; grep -vE "Warn|warn" $o/ct_4096.txt | tail -6
say done
cd $OUT && tar czf w9.tgz w9 && rm -rf w9
