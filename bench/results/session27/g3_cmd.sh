#!/usr/bin/env bash
# Session 27, call g3 (H200): the kernel's exit wait. Each CTA of fp8_gemm waits at its end for
# its last TMA stores to complete (`cp.async.bulk.wait_group 0`: the writes reach global
# memory), while shared memory only has to outlive their reads (`wait_group.read 0`, as
# CUTLASS's epilogues end; DeepGEMM's kernel exits without a wait). g1 found a fixed cost of
# ~0.3 us against DeepGEMM at one-wave 64-row tiles (K = 256). compare_tiles, the heuristic's
# pick from the packaged csrc against .exp/rd (the exit wait .read only, in fp8_gemm and
# fp8_wgrad) in the same rounds, DeepGEMM 54e2261 beside them.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/g3; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 570 - (SECONDS - t0) )); }
rd=@$PWD/.exp/rd/csrc
say "compare_tiles"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 7 \
  --shape 128,4096,256 --shape 128,4096,4096 --shape 128,4096,7168 --shape 64,7168,2048 \
  --shape 48,9216,4096 --shape 64,32768,512 --shape 64,24576,1536 --shape 384,4096,8192 \
  --shape 4096,4096,7168 --shape 4096,7168,16384 --shape 2048,2112,7168 \
  --config heuristic --config "heuristic$rd" --json $o/ct.json > $o/ct.txt 2>&1
echo "rc $?"
grep -vE "Warn|warn" $o/ct.txt | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/'
say done
cd $OUT && tar czf g3.tgz g3 && rm -rf g3
