#!/usr/bin/env bash
# Session 12, call p2 (H200): kernel p1 (B-scale split as a compile-time constant).
# 1. tests/gpu/test_hopper_gemm.py on the new kernel (every forced tile width, odd N / M);
# 2. A/B with DeepGEMM in the same rounds: the old csrc (.old/p2base, main before p1) against
#    the new one on the widths p1 changes (96, 160, 192);
# 3. the medium-M dense sweep (broad fit rows 70..116, mc1 only) for the cost-model refit.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/p2; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
(bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err) & dgpid=$!
say tests
timeout -k 5 260 python -m pytest -q -p no:cacheprovider -x tests/gpu/test_hopper_gemm.py \
  > $o/tests.txt 2>&1; echo "pytest rc $?"; tail -4 $o/tests.txt
wait $dgpid; . /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say ab
base=$PWD/.old/p2base/csrc
timeout -k 5 170 python -m bench.compare_tiles --shape 384,4096,14336 --shape 511,6144,16384 \
  --shape 1024,1536,7168 --shape 200,10240,8192 --config 128x96@$base --config 128x96 \
  --config 128x192@$base --config 128x192 --config 128x160@$base --config 128x160 \
  --rounds 3 --json $o/ab.json > $o/ab.txt 2>&1; echo "ab rc $?"; grep -v Warn $o/ab.txt | grep -v _warn
if [ "${SWEEP:-0}" = 1 ]; then
say sweep
timeout -k 5 ${SWEEP_S:-200} python -m bench.bench_gemm --suite broad --part fit \
  --only $(seq -s, 70 116) --sweep --sweep-block-n 96,128,160,192,256 --sweep-multicast 1 \
  --json $o/sweep.json > $o/sweep.txt 2>&1; echo "sweep rc $?"; tail -3 $o/sweep.txt
fi
say done
cd $OUT && tar czf p2.tgz p2 && rm -rf p2
