#!/usr/bin/env bash
# DeepGEMM 54e2261 built with one probe hook: DG_FORCE_LAYOUT="BLOCK_M,BLOCK_N,CLUSTER_M,CLUSTER_N"
# replaces its heuristic's layout for the 1D1D (weight-gradient) kernels, so that dgemm's and
# DeepGEMM's kernels can be timed at the same tile and cluster (CLUSTER_M 2: a pair sharing B,
# dgemm's "x2b"; CLUSTER_N 2: sharing A, "x2a"). Unset, it is the stock anchor; set but not
# four integers, DeepGEMM's host assert stops the call. The hook skips DeepGEMM's own legality
# filters, and DG_PRINT_CONFIGS still prints its heuristic's cost of the layout it would pick.
# A probe only: the published tables use .anchors/setup_deepgemm.sh. Prints the exports, like
# that script. Usage on the GPU machine, from the repository root with .anchors/ carried:
#     bash bench/deepgemm_forced.sh > /tmp/dgf_env; . /tmp/dgf_env
set -euo pipefail
anchors=$(cd "$(dirname "$0")/.." && pwd)/.anchors
root=${DEEPGEMM_FORCED_ROOT:-/tmp/deepgemm_forced}
heuristics=$root/dg_head/csrc/jit_kernels/heuristics/common.hpp
fail() { echo "echo 'DeepGEMM (forced): $1' >&2"; exit 1; }
# A build is reused only if it carries the hook (not a stock build in the same root).
if ! ls "$root"/dg_head/deep_gemm/_C*.so > /dev/null 2>&1 ||
   ! grep -q DG_FORCE_LAYOUT "$heuristics" 2> /dev/null; then
  rm -rf "$root" && mkdir -p "$root"
  tar xzf "$anchors/deepgemm-54e2261.tar.gz" -C "$root" || fail "no $anchors/deepgemm-54e2261.tar.gz"
  python3 - "$heuristics" <<'PY' || fail "the hook no longer applies to $heuristics"
import sys, pathlib
p = pathlib.Path(sys.argv[1]); text = p.read_text()
anchor, include = "    // Infer other configs\n", "#include <unordered_set>"
assert text.count(anchor) == 1 and text.count(include) == 1, "the anchor's common.hpp changed"
hook = """    // PROBE (dgemm bench/deepgemm_forced.sh): DG_FORCE_LAYOUT=bm,bn,cm,cn for 1D1D kernels
    if (desc.kernel_type == KernelType::Kernel1D1D) {
        const auto forced = get_env<std::string>("DG_FORCE_LAYOUT");
        int bm = 0, bn = 0, cm = 0, cn = 0;
        if (not forced.empty()) {
            DG_HOST_ASSERT(std::sscanf(forced.c_str(), "%d,%d,%d,%d", &bm, &bn, &cm, &cn) == 4);
            layout = Layout{0, bm, bn, layout.block_k, cm, cn};
        }
    }
"""
text = text.replace(anchor, hook + anchor)
p.write_text(text.replace(include, "#include <cstdio>\n#include <string>\n" + include))
PY
  cd "$root/dg_head"
  ln -sfn ../../third-party/cutlass/include/cute deep_gemm/include/cute
  ln -sfn ../../third-party/cutlass/include/cutlass deep_gemm/include/cutlass
  DG_USE_LOCAL_VERSION=0 MAX_JOBS=16 python3 setup.py build_ext --inplace > "$root/build.log" 2>&1 \
    || fail "build failed: see $root/build.log"
fi
echo "export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
echo "export PYTHONPATH=$root/dg_head\${PYTHONPATH:+:\$PYTHONPATH}"
