#!/usr/bin/env bash
# Session 18, call y9 (H200): Nsight Compute, one launch each, of the weight gradient after
# this session's kernel changes against DeepGEMM 54e2261 at its own config, on the two
# shapes furthest behind in y8 (2112x7168x16384: ours 120x1; 7168x16384x16384: ours 128x1),
# with per-instruction stall samples (SASS CSVs) for the next session.
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/y9; mkdir -p $o
export OUT=$o
PROFILE_SOURCE=1 bash bench/gpu_profile.sh wgrad 2112 7168 16384 heuristic 2>&1 | tee $o/a.txt
mkdir -p $o/a && mv $o/ncu_* $o/a/ 2> /dev/null
PROFILE_SOURCE=1 bash bench/gpu_profile.sh wgrad 7168 16384 16384 heuristic 2>&1 | tee $o/b.txt
mkdir -p $o/b && mv $o/ncu_* $o/b/ 2> /dev/null
cd $o/.. && tar czf y9.tgz y9 && rm -rf y9
