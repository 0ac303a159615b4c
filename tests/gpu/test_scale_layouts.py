"""The sm_90a kernel reads A's scales through their strides (its A-scale loader warp,
csrc/dgemm/fp8_gemm.cuh): row-major as `per_token_cast_to_fp8` returns them, the MN-major
TMA-aligned layout, MN-major without the alignment, every other row of a larger tensor, and
4 bytes off an aligned address all give bit-identical output, for each layout and tile height,
with odd M (rows past M zero-filled) and poisoned outputs."""
from __future__ import annotations

import pytest
import torch

import dgemm
from dgemm import heuristics

from helpers import DIFF_BAR, poisoned, random_contiguous, random_dense, random_masked, \
    unwritten_count

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90 (Hopper) GPU")


def layouts(sa: torch.Tensor):
    """(name, the same scales in another layout) for row-major `sa` [(G,) rows, K/128]."""
    rows, kb = sa.shape[-2], sa.shape[-1]
    yield "mn-major aligned", dgemm.get_mn_major_tma_aligned_tensor(sa)
    # MN-major with a pitch of exactly `rows` (not a multiple of 4), 4 bytes off.
    lead = sa.shape[:-2]
    storage = torch.empty(sa.numel() + 1, device=sa.device)
    mn = storage[1:].view(*lead, kb, rows).transpose(-1, -2)
    mn.copy_(sa)
    yield "mn-major unaligned", mn
    wide = torch.empty(*lead, rows, 2 * kb + 3, device=sa.device)
    wide[..., :kb] = sa
    yield "row-major padded rows", wide[..., :kb]
    every_other = torch.empty(*lead, 2 * rows, kb, device=sa.device)
    every_other[..., ::2, :] = sa
    yield "every other row", every_other[..., ::2, :]


@pytest.mark.parametrize("tile", [None, (64, 64), (128, 128), (192, 128), (128, 256)],
                         ids=str)
@pytest.mark.parametrize("m,n,k", [(1, 576, 1536), (65, 2112, 7168), (257, 4096, 512)])
def test_dense_output_is_the_same_for_every_scale_layout(tile, m, n, k):
    case = random_dense(m, n, k)
    if tile is None:
        check_dense_layouts(case, m, n)
    else:
        with heuristics.forced_tile(*tile):
            check_dense_layouts(case, m, n)


def check_dense_layouts(case, m: int, n: int) -> None:
    want = dgemm.fp8_gemm_nt(case.a, case.b, poisoned(m, n))
    assert unwritten_count(want) == 0
    assert dgemm.calc_diff(want, case.ref) < DIFF_BAR
    for name, sa in layouts(case.a[1]):
        got = dgemm.fp8_gemm_nt((case.a[0], sa), case.b, poisoned(m, n))
        assert torch.equal(got, want), f"{name}: output differs from row-major scales"


def test_contiguous_output_is_the_same_for_every_scale_layout():
    case = random_contiguous([100, 0, 300, 7], 2112, 7168)
    m = case.a[0].shape[0]
    want = torch.zeros(m, 2112, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, want, case.m_indices)
    valid = case.m_indices >= 0
    assert dgemm.calc_diff(want[valid], case.ref[valid]) < DIFF_BAR
    for name, sa in layouts(case.a[1]):
        got = torch.zeros_like(want)
        dgemm.m_grouped_fp8_gemm_nt_contiguous((case.a[0], sa), case.b, got, case.m_indices)
        assert torch.equal(got, want), f"{name}: output differs from row-major scales"


def test_masked_output_is_the_same_for_every_scale_layout():
    case = random_masked([5, 0, 129, 64], 200, 4096, 1536)
    want = torch.zeros(4, 200, 4096, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, want, case.masked_m, 64)
    for g, rows in enumerate(case.masked_m.tolist()):
        if rows:
            assert dgemm.calc_diff(want[g, :rows], case.ref[g, :rows]) < DIFF_BAR
    for name, sa in layouts(case.a[1]):
        got = torch.zeros_like(want)
        dgemm.m_grouped_fp8_gemm_nt_masked((case.a[0], sa), case.b, got, case.masked_m, 64)
        assert torch.equal(got, want), f"{name}: output differs from row-major scales"
