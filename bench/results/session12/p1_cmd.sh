#!/usr/bin/env bash
# Session 12, call p1 (H200): why a one-wave 128x96 / 128x192 tile trails DeepGEMM's same tile.
# ncu of both kernels on two one-wave shapes, then pipeline depth in compare_tiles with
# DeepGEMM in the same rounds.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; mkdir -p $OUT/p1
start=$(date +%s)
bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $OUT/p1/dg_setup.err; . /tmp/dg_env
echo "deepgemm setup $(( $(date +%s) - start )) s"; python3 -c "import deep_gemm" || exit 3
OUT=$OUT/p1/a PROFILE_SOURCE=1 bash bench/gpu_profile.sh dense 511 6144 16384 128x192 heuristic
OUT=$OUT/p1/b PROFILE_SOURCE=1 bash bench/gpu_profile.sh dense 384 4096 14336 heuristic
echo "ncu done $(( $(date +%s) - start )) s"
timeout 200 python3 -m bench.compare_tiles --shape 384,4096,14336 --config 128x96x4 \
  --config 128x96x5 --config 128x96x6 --rounds 3 --json $OUT/p1/depth_a.json
timeout 150 python3 -m bench.compare_tiles --shape 511,6144,16384 --config 128x192x3 \
  --config 128x192x4 --config 128x96x6 --rounds 3 --json $OUT/p1/depth_b.json
echo "all done $(( $(date +%s) - start )) s"
cd $OUT && tar czf p1.tgz p1 && rm -rf p1
