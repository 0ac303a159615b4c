"""The portable kernel (csrc/dgemm/fp8_gemm_portable.cuh) through the public API, forced with
DGEMM_FORCE_PORTABLE so it also runs (as the oracle) on Hopper.

Every check draws fresh random inputs and poisons the output with NaN first: an element that
should have been written and was not, or one that must stay untouched and was written, fails.
"""
from __future__ import annotations

import random

import pytest
import torch

import dgemm
import helpers
from helpers import DIFF_BAR, SHAPES

pytestmark = pytest.mark.usefixtures("force_portable")

ODD_SHAPES = [(m, n, k) for m in (1, 7, 65, 1000) for n in (576, 2120) for k in (1024, 7168)]
ODD_SHAPES += [(33, 2121, 256), (5, 100, 128), (130, 8, 384)]   # odd N, N < 128, N < tile


# --- exactness ------------------------------------------------------------------------------------
def test_every_fp8_value_passes_through_an_identity_gemm_exactly():
    all_bytes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    all_bytes[(all_bytes & 0x7f) == 0x7f] = 0          # the two NaN encodings
    a = all_bytes.view(2, 128).cuda().view(torch.float8_e4m3fn)
    b = torch.eye(128, device="cuda").to(torch.float8_e4m3fn)
    ones_a = torch.ones(2, 1, device="cuda")
    ones_b = torch.ones(1, 1, device="cuda")
    d = dgemm.fp8_gemm_nt((a, ones_a), (b, ones_b), helpers.poisoned(2, 128))
    mismatches = (d.float() != a.float()).nonzero()
    assert mismatches.numel() == 0, f"first mismatches (row, col): {mismatches[:8].tolist()}"


def test_a_permutation_matrix_permutes_columns_exactly():
    a = torch.randn(64, 256, device="cuda").to(torch.float8_e4m3fn)
    perm = torch.randperm(256, device="cuda")
    b = torch.zeros(256, 256, device="cuda")
    b[torch.arange(256, device="cuda"), perm] = 1.0        # row n of B picks column perm[n]
    d = dgemm.fp8_gemm_nt((a, torch.ones(64, 2, device="cuda")),
                          (b.to(torch.float8_e4m3fn), torch.ones(2, 2, device="cuda")))
    assert torch.equal(d.float(), a.float()[:, perm])


def test_scales_apply_per_row_per_k_block_and_per_128_columns():
    m, n, k = 8, 256, 256
    a = torch.ones(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.ones(n, k, device="cuda").to(torch.float8_e4m3fn)
    row_scale = 2.0 ** torch.arange(m, device="cuda", dtype=torch.float32)
    sa = torch.stack([row_scale, 2 * row_scale], dim=1)           # [m, 2 k blocks]
    sb = torch.tensor([[1.0, 1.0], [0.25, 0.25]], device="cuda")  # [2 n blocks, 2 k blocks]
    d = dgemm.fp8_gemm_nt((a, sa), (b, sb))
    col_scale = torch.tensor([1.0] * 128 + [0.25] * 128, device="cuda")
    expected = 128 * 3 * row_scale[:, None] * col_scale[None, :]
    assert torch.equal(d.float(), expected)


# --- dense ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dense_table():
    helpers.print_heading("portable dense")
    yield


@pytest.fixture(scope="module")
def contiguous_table():
    helpers.print_heading("portable contig")
    yield


@pytest.fixture(scope="module")
def masked_table():
    helpers.print_heading("portable masked")
    yield


@pytest.mark.parametrize("m,n,k", helpers.DENSE_SHAPES + ODD_SHAPES)
def test_dense_matches_float32_reference_and_writes_every_element(dense_table, m, n, k):
    case = helpers.random_dense(m, n, k)
    d = helpers.poisoned(m, n)
    dgemm.fp8_gemm_nt(case.a, case.b, d)
    assert helpers.unwritten_count(d) == 0, f"{m}x{n}x{k}: unwritten elements"
    diff = dgemm.calc_diff(d, case.ref)
    helpers.print_row(m, n, k, helpers.kernel_us(lambda: dgemm.fp8_gemm_nt(case.a, case.b, d)),
                      diff)
    assert diff < DIFF_BAR, f"{m}x{n}x{k}: calc_diff {diff:.2e}"


def test_dense_allocates_the_output_when_d_is_none():
    case = helpers.random_dense(65, 576, 512)
    d = dgemm.fp8_gemm_nt(case.a, case.b)
    assert d.shape == (65, 576) and d.dtype == torch.bfloat16 and d.is_cuda
    assert dgemm.calc_diff(d, case.ref) < DIFF_BAR


def test_scales_already_in_mn_major_layout_give_the_same_result():
    case = helpers.random_dense(100, 576, 512)
    aligned = dgemm.get_mn_major_tma_aligned_tensor(case.a[1])
    first = dgemm.fp8_gemm_nt(case.a, case.b)
    second = dgemm.fp8_gemm_nt((case.a[0], aligned), case.b)
    assert torch.equal(first, second)


def test_zero_rows_return_without_launching():
    case = helpers.random_dense(1, 576, 512)
    a = (case.a[0][:0], case.a[1][:0])
    d = dgemm.fp8_gemm_nt(a, case.b)
    assert d.shape == (0, 576)


def test_host_overhead_per_call_stays_low():
    case = helpers.random_dense(64, 2112, 7168)
    d = torch.empty(64, 2112, device="cuda", dtype=torch.bfloat16)
    aligned = (case.a[0], dgemm.get_mn_major_tma_aligned_tensor(case.a[1]))
    per_call = helpers.host_us_per_call(lambda: dgemm.fp8_gemm_nt(aligned, case.b, d))
    with_copy = helpers.host_us_per_call(lambda: dgemm.fp8_gemm_nt(case.a, case.b, d))
    device = helpers.kernel_us(lambda: dgemm.fp8_gemm_nt(aligned, case.b, d))
    print(f"\nportable fp8_gemm_nt 64x2112x7168 per call: {per_call:.1f} us with MN-major "
          f"scales, {with_copy:.1f} us with row-major scales (copied); kernel {device:.1f} us")
    # Generous: catches a per-call compile, cache walk or sync, not a few microseconds.
    assert per_call < 100.0


# --- grouped contiguous ---------------------------------------------------------------------------
def _run_contiguous(case: helpers.ContiguousCase, n: int, label: str):
    m_sum = case.m_indices.numel()
    d = helpers.poisoned(m_sum, n)
    dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, case.m_indices)
    assert helpers.unwritten_count(d, case.valid) == 0, f"{label}: unwritten valid rows"
    assert helpers.overwritten_count(d, ~case.valid) == 0, f"{label}: padding rows written"
    diff = helpers.calc_diff_rows(d, case.ref, case.valid)
    assert diff < DIFF_BAR, f"{label}: calc_diff {diff:.2e}"
    return d, diff


@pytest.mark.parametrize("shape", SHAPES["grouped_contiguous"],
                         ids=lambda s: f"g{s['groups']}-m{s['m_per_group']}-n{s['n']}-k{s['k']}")
def test_contiguous_matches_reference_and_leaves_padding_rows_untouched(contiguous_table, shape):
    rng = random.Random(shape["groups"] * shape["n"])
    rows = [int(shape["m_per_group"] * rng.uniform(0.7, 1.3)) for _ in range(shape["groups"])]
    case = helpers.random_contiguous(rows, shape["n"], shape["k"])
    d, diff = _run_contiguous(case, shape["n"], str(shape))
    us = helpers.kernel_us(lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(
        case.a, case.b, d, case.m_indices), iterations=3)
    helpers.print_row(case.m_indices.numel(), shape["n"], shape["k"], us, diff,
                      flop_m=sum(rows))


@pytest.mark.parametrize("rows", [[0, 130, 5], [1], [1, 0, 1], [0, 0], [300],
                                  [random.Random(64).randint(0, 40) for _ in range(64)]],
                         ids=["empty-group", "one-row", "one-row-groups", "all-padding", "g1",
                              "g64"])
def test_contiguous_edge_cases(rows):
    _run_contiguous(helpers.random_contiguous(rows, 576, 256), 576, f"rows={rows}")


# --- grouped masked -------------------------------------------------------------------------------
def _run_masked(case: helpers.MaskedCase, label: str):
    groups, max_m, _ = case.a[0].shape
    n = case.b[0].shape[1]
    d = helpers.poisoned(groups, max_m, n)
    expected_m = max(1, int(case.masked_m.float().mean()))
    dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, expected_m)
    assert helpers.unwritten_count(d, case.valid) == 0, f"{label}: unwritten valid rows"
    assert helpers.overwritten_count(d, ~case.valid) == 0, f"{label}: masked rows written"
    diff = helpers.calc_diff_rows(d, case.ref, case.valid)
    assert diff < DIFF_BAR, f"{label}: calc_diff {diff:.2e}"
    return d, diff


@pytest.mark.parametrize("shape", SHAPES["grouped_masked"],
                         ids=lambda s: f"g{s['groups']}-m{s['expected_m']}-n{s['n']}-k{s['k']}")
def test_masked_matches_reference_and_leaves_masked_rows_untouched(masked_table, shape):
    rng = random.Random(shape["groups"] * shape["n"] + 1)
    rows = [int(shape["expected_m"] * rng.uniform(0.7, 1.3)) for _ in range(shape["groups"])]
    case = helpers.random_masked(rows, shape["max_m"], shape["n"], shape["k"])
    d, diff = _run_masked(case, str(shape))
    us = helpers.kernel_us(lambda: dgemm.m_grouped_fp8_gemm_nt_masked(
        case.a, case.b, d, case.masked_m, shape["expected_m"]), iterations=3)
    helpers.print_row(shape["max_m"], shape["n"], shape["k"], us, diff, flop_m=sum(rows))


@pytest.mark.parametrize("rows,max_m", [([0, 17], 64), ([1], 64), ([64], 64), ([3] * 64, 8),
                                        ([200, 5], 128)],
                         ids=["masked-zero", "one-row", "g1-full", "g64", "above-max-m"])
def test_masked_edge_cases(rows, max_m):
    # Values above max_m act as max_m (documented): `valid` then covers every row.
    case = helpers.random_masked(rows, max_m, 576, 256)
    _run_masked(case, f"rows={rows} max_m={max_m}")


def test_a_captured_graph_serves_any_masked_m():
    case = helpers.random_masked([40, 10, 0], 64, 576, 256)
    d = helpers.poisoned(3, 64, 576)
    masked_m = case.masked_m.clone()
    dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, masked_m, 32)     # load outside capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, masked_m, 32)
    for rows in ([64, 0, 3], [1, 64, 20]):
        masked_m.copy_(torch.tensor(rows, dtype=torch.int32))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        valid = torch.arange(64, device="cuda")[None, :] < masked_m[:, None]
        assert helpers.unwritten_count(d, valid) == 0 and helpers.overwritten_count(d, ~valid) == 0
        assert helpers.calc_diff_rows(d, case.ref, valid) < DIFF_BAR, f"masked_m={rows}"
