"""Small dense, masked and contiguous calls for compute-sanitizer (memcheck, racecheck):

    compute-sanitizer --tool memcheck --report-api-errors no python3 bench/sanitizer_smoke.py

Prints calc_diff for the dense calls; the sanitizer's ERROR SUMMARY is the result. Runs the
heuristic's tiles, then the two-wave 128x256 and three-warpgroup 192x128 tiles forced, alone
and in 2-CTA clusters (sharing B: dense calls only).
"""
import contextlib
import pathlib
import sys

import torch

import dgemm
from dgemm.utils import calc_diff
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))
from helpers import forced_tile  # noqa: E402
torch.manual_seed(1)
def dense(m, n, k):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16); w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    d = dgemm.fp8_gemm_nt(dgemm.per_token_cast_to_fp8(x), dgemm.per_block_cast_to_fp8(w))
    torch.cuda.synchronize(); print("dense", m, n, k, f"{calc_diff(d, x.float() @ w.float().t()):.1e}")
def run_all(contiguous=True, grouped=True):
    for s in [(1, 576, 128), (65, 2120, 256), (200, 100, 512), (129, 264, 384), (300, 200, 1024)]:
        dense(*s)
    if not grouped:
        return
    g, max_m, n, k = 3, 96, 264, 256
    a = torch.randn(g, max_m, k, device="cuda").to(torch.float8_e4m3fn); sa = torch.rand(g, max_m, k // 128, device="cuda")
    b = torch.randn(g, n, k, device="cuda").to(torch.float8_e4m3fn); sb = torch.rand(g, 3, k // 128, device="cuda")
    d = torch.empty(g, max_m, n, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_masked((a, sa), (b, sb), d, torch.tensor([5, 0, 96], device="cuda", dtype=torch.int32), 48)
    mi = torch.full((384,), -1, device="cuda", dtype=torch.int32); mi[:100] = 0; mi[128:129] = 2; mi[256:380] = 1
    a2 = torch.randn(384, k, device="cuda").to(torch.float8_e4m3fn); sa2 = torch.rand(384, k // 128, device="cuda")
    d2 = torch.empty(384, n, device="cuda", dtype=torch.bfloat16)
    if contiguous:
        dgemm.m_grouped_fp8_gemm_nt_contiguous((a2, sa2), (b, sb), d2, mi)
    torch.cuda.synchronize(); print("grouped ok")
# (block_m, block_n, cluster size, cluster shares A)
for tile in (None, (128, 256, 1, True), (192, 128, 1, True), (128, 256, 2, False),
             (192, 128, 2, True)):
    print("tile", tile or "heuristic")
    with forced_tile(*tile) if tile else contextlib.nullcontext():
        # 192-row tiles: not contiguous; clusters sharing B: plain GEMM only.
        run_all(contiguous=tile is None or tile[0] <= 128, grouped=tile is None or tile[3])
