"""Small dense, masked and contiguous calls for compute-sanitizer (memcheck, synccheck):

    compute-sanitizer --tool memcheck --report-api-errors no python -m bench.sanitizer_smoke

Prints calc_diff for the dense calls; the sanitizer's ERROR SUMMARY is the result. Runs the
heuristic's tiles, then the two-wave 128x256 and three-warpgroup 192x128 tiles forced, alone
and in 2-CTA clusters (sharing B: dense and contiguous calls; a contiguous pair in two groups,
a pair of a real and a padding block, and a lone last block), 64-row tiles (the narrow one,
up to 128 columns, runs one pipelined chain at every K, two K blocks in flight, session 33; the
wide one runs one chain at K of 1, 2, 3, 4 and 8 blocks and at 9 and 56 a pair of chains on
alternate stages, v23, whose partial sums meet in shared memory), K-split pairs (dense calls
with an even K block count: two CTAs per tile exchanging partial sums), 256-row tiles (dense
only: two 128-row waves per warpgroup, alone and sharing A; session 35), and last 64x64 chains
with an odd ring (the autotuner's depth candidate, session 34).

racecheck also reports the in-place A-scale loader's cp.async writes against the math
warpgroups' scale reads on every tile: an mbarrier orders them (cp.async.mbarrier.arrive), which
racecheck does not follow (bench/NOTES.md, session 28). memcheck and synccheck are the checks.
"""
from __future__ import annotations

import contextlib
import sys

import torch

import dgemm
from dgemm import heuristics

from .inputs import random_dense

DENSE_SHAPES = [(1, 576, 128), (65, 2120, 256), (200, 100, 512), (129, 264, 384),
                (300, 200, 1024), (100, 328, 1152), (70, 120, 7168)]
# (block_m, block_n, cluster size, cluster shares A, k_split); None: the heuristic's pick.
TILES = [None, (128, 256, 1, True, 1), (192, 128, 1, True, 1), (128, 256, 2, False, 1),
         (128, 192, 2, False, 1), (192, 128, 2, True, 1), (64, 160, 1, True, 1),
         (64, 56, 1, True, 1), (128, 64, 1, False, 2), (128, 96, 1, False, 2),
         (128, 256, 1, False, 2), (256, 128, 1, True, 1), (256, 96, 2, True, 1)]


def dense(m: int, n: int, k: int) -> None:
    case = random_dense(m, n, k)
    d = dgemm.fp8_gemm_nt(case.a, case.b)
    torch.cuda.synchronize()
    print("dense", m, n, k, f"{dgemm.calc_diff(d, case.ref):.1e}")


def odd_ring(m: int, n: int, k: int) -> None:
    """A 64x64 chain with an odd ring: the autotuner's depth candidate (session 34; 13 stages
    at every K here), launched directly (no heuristic picks it)."""
    from dgemm.kernels import hopper_fp8
    case = random_dense(m, n, k)
    (a, sa), (b, sb) = case.a, case.b
    spec = hopper_fp8.depth_candidate(hopper_fp8.with_tile(heuristics.select(
        "fp8_gemm_nt", m, n, k, num_sms=dgemm.get_num_sms()), 64, 64))
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    hopper_fp8.launch(spec, a, sa, b, sb, d, None)
    torch.cuda.synchronize()
    print("odd ring", m, n, k, spec.num_stages, f"{dgemm.calc_diff(d, case.ref):.1e}")


def grouped(contiguous: bool, masked: bool = True) -> None:
    """If `masked`, one masked call (an empty group, a partial one, a full one) and, if
    `contiguous`, one contiguous call with padding rows between groups and a block of padding
    alone (5 blocks); values unchecked, only memory."""
    g, max_m, n, k = 3, 96, 264, 256
    a = torch.randn(g, max_m, k, device="cuda").to(torch.float8_e4m3fn)
    sa = torch.rand(g, max_m, k // 128, device="cuda")
    b = torch.randn(g, n, k, device="cuda").to(torch.float8_e4m3fn)
    sb = torch.rand(g, 3, k // 128, device="cuda")
    d = torch.empty(g, max_m, n, device="cuda", dtype=torch.bfloat16)
    masked_m = torch.tensor([5, 0, 96], device="cuda", dtype=torch.int32)
    if masked:
        dgemm.m_grouped_fp8_gemm_nt_masked((a, sa), (b, sb), d, masked_m, 48)
    if contiguous:
        m_indices = torch.full((640,), -1, device="cuda", dtype=torch.int32)
        m_indices[:100], m_indices[128:129], m_indices[256:380] = 0, 2, 1
        m_indices[512:600] = 2
        a2 = torch.randn(640, k, device="cuda").to(torch.float8_e4m3fn)
        sa2 = torch.rand(640, k // 128, device="cuda")
        d2 = torch.empty(640, n, device="cuda", dtype=torch.bfloat16)
        dgemm.m_grouped_fp8_gemm_nt_contiguous((a2, sa2), (b, sb), d2, m_indices)
    torch.cuda.synchronize()
    print("grouped ok")


def main() -> int:
    if not torch.cuda.is_available():
        print("sanitizer_smoke: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(1)
    for tile in TILES:
        print("tile", tile or "heuristic")
        k_split = tile is not None and tile[4] > 1
        with heuristics.forced_tile(*tile) if tile else contextlib.nullcontext():
            for m, n, k in DENSE_SHAPES:
                if not k_split or (k // 128) % 2 == 0:      # K-split pairs: even K blocks
                    dense(m, n, k)
            # Clusters sharing B: not the masked layout; 192-row tiles: not the contiguous one;
            # K-split pairs and 256-row tiles: the plain GEMM only.
            shares_b = tile is not None and tile[2] > 1 and not tile[3]
            if not k_split and (tile is None or tile[0] != 256):
                grouped(contiguous=tile is None or tile[0] <= 128, masked=not shares_b)
    for m, n, k in DENSE_SHAPES:
        odd_ring(m, n, k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
