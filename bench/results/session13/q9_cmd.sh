#!/usr/bin/env bash
# Session 13, call q9 (H200): the weight-gradient table again with rotating rounds (session 10's
# 0.905 was timed with dgemm first in every round; q5 showed the first function of a round runs
# faster), and the issue-13 host time per call on this machine, DeepGEMM 54e2261 in the same
# process for both.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/q9; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
say "wgrad"
timeout -k 5 400 python -m bench.bench_wgrad --rounds 4 --json $o/wgrad.json > $o/wgrad.txt 2>&1
echo "rc $?"; tail -8 $o/wgrad.txt
say "call"
timeout -k 5 $(( 585 - (SECONDS - t0) )) python -m bench.bench_call --json $o/call.json > $o/call.txt 2>&1
echo "rc $?"; tail -14 $o/call.txt
say done
cd $OUT && tar czf q9.tgz q9 && rm -rf q9
