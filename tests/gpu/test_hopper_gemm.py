"""sm_90a FP8 GEMMs (csrc/dgemm/fp8_gemm.cuh) against a float32 reference of the unquantised
inputs: dense shapes of DeepSeek-V3, odd shapes, both compilers, and the grouped layouts.

Every check draws fresh random inputs and poisons the output first, so an unwritten element
(NaN) or a written one that must stay untouched fails the test.
"""
from __future__ import annotations

import json
import pathlib
import random

import pytest
import torch

import dgemm

SHAPES = json.loads((pathlib.Path(dgemm.__file__).parent / "shapes" / "deepseek_v3.json").read_text())
DENSE = [(m, n, k) for m in SHAPES["dense"]["m"] for n, k in SHAPES["dense"]["nk"]]
ODD = [(m, n, k) for m in (1, 7, 63, 65, 129, 1000, 4097) for n, k in ((576, 7168), (2120, 256))]
ODD += [(128, 100, 512), (200, 8, 128), (33, 4104, 384), (64, 1000, 1152)]
POISON = float("nan")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90 (Hopper) GPU")


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x.double(), y.double()
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def quantised_pair(m: int, n: int, k: int):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    return x, w, dgemm.per_token_cast_to_fp8(x), dgemm.per_block_cast_to_fp8(w)


def print_row(name: str, m: int, n: int, k: int, diff: float) -> None:
    print(f"{name:<18} {m:>6} {n:>6} {k:>6} {diff:>9.1e}")


@pytest.mark.parametrize("m,n,k", DENSE + ODD)
def test_dense_gemm_matches_reference(m, n, k):
    x, w, a, b = quantised_pair(m, n, k)
    d = torch.full((m, n), POISON, device="cuda", dtype=torch.bfloat16)
    dgemm.fp8_gemm_nt(a, b, d)
    ref = x.float() @ w.float().t()
    assert not d.isnan().any(), f"{m}x{n}x{k}: unwritten output elements"
    diff = calc_diff(d, ref)
    print_row("fp8_gemm_nt", m, n, k, diff)
    assert diff < 1e-3, f"{m}x{n}x{k}: calc_diff {diff:.2e}"


def test_dense_gemm_allocates_output_when_d_is_none():
    x, w, a, b = quantised_pair(130, 264, 512)
    d = dgemm.fp8_gemm_nt(a, b)
    assert d.shape == (130, 264) and d.dtype == torch.bfloat16
    assert calc_diff(d, x.float() @ w.float().t()) < 1e-3


def test_dense_gemm_is_deterministic_across_calls():
    _, _, a, b = quantised_pair(1000, 2112, 7168)
    first = dgemm.fp8_gemm_nt(a, b)
    second = dgemm.fp8_gemm_nt(a, b)
    assert torch.equal(first, second)


def test_nvrtc_and_nvcc_builds_give_identical_results(monkeypatch):
    _, _, a, b = quantised_pair(257, 2112, 1536)
    outputs = {}
    for compiler in ("nvrtc", "nvcc"):
        monkeypatch.setenv("DGEMM_JIT_COMPILER", compiler)
        dgemm.jit.runtime.clear_loaded_kernels()
        outputs[compiler] = dgemm.fp8_gemm_nt(a, b)
    assert torch.equal(outputs["nvrtc"], outputs["nvcc"])


def test_hopper_and_portable_kernels_agree(monkeypatch):
    x, w, a, b = quantised_pair(200, 576, 2048)
    hopper = dgemm.fp8_gemm_nt(a, b)
    monkeypatch.setenv("DGEMM_FORCE_PORTABLE", "1")
    portable = dgemm.fp8_gemm_nt(a, b)
    assert calc_diff(hopper, portable) < 1e-5


# ---- grouped: contiguous layout ------------------------------------------------------------
def contiguous_inputs(group_rows, n: int, k: int):
    """Rows of each group padded to the M alignment; padding rows carry -1."""
    align = dgemm.get_mk_alignment_for_contiguous_layout()
    padded = [dgemm.ceil_div(r, align) * align for r in group_rows]
    m_sum, g = sum(padded), len(group_rows)
    x = torch.randn(m_sum, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
    m_indices = torch.full((m_sum,), -1, device="cuda", dtype=torch.int32)
    start = 0
    for i, (rows, size) in enumerate(zip(group_rows, padded)):
        m_indices[start:start + rows] = i
        start += size
    a = dgemm.per_token_cast_to_fp8(x)
    b_fp8 = torch.empty(g, n, k, device="cuda", dtype=torch.float8_e4m3fn)
    b_scales = torch.empty(g, dgemm.ceil_div(n, 128), k // 128, device="cuda", dtype=torch.float32)
    for i in range(g):
        b_fp8[i], b_scales[i] = dgemm.per_block_cast_to_fp8(w[i])
    return x, w, a, (b_fp8, b_scales), m_indices


def check_contiguous(group_rows, n, k):
    x, w, a, b, m_indices = contiguous_inputs(group_rows, n, k)
    d = torch.full((x.shape[0], n), POISON, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices)
    valid = m_indices >= 0
    assert d[~valid].isnan().all(), "padding rows (-1) were written"
    for g in range(w.shape[0]):
        rows = m_indices == g
        if rows.any():
            ref = x[rows].float() @ w[g].float().t()
            diff = calc_diff(d[rows], ref)
            assert not d[rows].isnan().any(), f"group {g}: unwritten rows"
            assert diff < 1e-3, f"group {g} ({int(rows.sum())} rows): calc_diff {diff:.2e}"
    print_row(f"contiguous G={len(group_rows)}", int(valid.sum()), n, k, 0.0)


@pytest.mark.parametrize("case", SHAPES["grouped_contiguous"], ids=lambda c: f"{c['groups']}x{c['m_per_group']}x{c['n']}x{c['k']}")
def test_contiguous_grouped_gemm_matches_reference(case):
    rng = random.Random(case["groups"] * case["n"])
    rows = [int(case["m_per_group"] * rng.uniform(0.7, 1.3)) for _ in range(case["groups"])]
    check_contiguous(rows, case["n"], case["k"])


@pytest.mark.parametrize("group_rows", [[0, 5, 0], [1], [300, 0, 1, 129], [128] * 64, [7] * 64],
                         ids=["empty-groups", "one-row", "mixed", "G64-full", "G64-tiny"])
def test_contiguous_grouped_gemm_edge_cases(group_rows):
    check_contiguous(group_rows, 576, 512)


def test_contiguous_grouped_gemm_with_all_rows_padding_writes_nothing():
    _, _, a, b, m_indices = contiguous_inputs([0, 0], 256, 256)
    a = (torch.zeros(256, 256, device="cuda").to(torch.float8_e4m3fn),
         dgemm.get_mn_major_tma_aligned_tensor(torch.ones(256, 2, device="cuda")))
    m_indices = torch.full((256,), -1, device="cuda", dtype=torch.int32)
    d = torch.full((256, 256), POISON, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices)
    assert d.isnan().all()


# ---- grouped: masked layout ----------------------------------------------------------------
def masked_inputs(g: int, max_m: int, n: int, k: int):
    x = torch.randn(g, max_m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
    a_fp8 = torch.empty(g, max_m, k, device="cuda", dtype=torch.float8_e4m3fn)
    a_scales = torch.empty(g, max_m, k // 128, device="cuda", dtype=torch.float32)
    b_fp8 = torch.empty(g, n, k, device="cuda", dtype=torch.float8_e4m3fn)
    b_scales = torch.empty(g, dgemm.ceil_div(n, 128), k // 128, device="cuda", dtype=torch.float32)
    for i in range(g):
        a_fp8[i], a_scales[i] = dgemm.per_token_cast_to_fp8(x[i])
        b_fp8[i], b_scales[i] = dgemm.per_block_cast_to_fp8(w[i])
    a = (a_fp8, dgemm.get_mn_major_tma_aligned_tensor(a_scales))
    return x, w, a, (b_fp8, b_scales)


def check_masked(x, w, d, masked_m):
    for g, rows in enumerate(masked_m.tolist()):
        assert d[g, rows:].isnan().all(), f"group {g}: rows >= masked_m ({rows}) were written"
        if rows:
            ref = x[g, :rows].float() @ w[g].float().t()
            assert not d[g, :rows].isnan().any(), f"group {g}: unwritten rows"
            diff = calc_diff(d[g, :rows], ref)
            assert diff < 1e-3, f"group {g} ({rows} rows): calc_diff {diff:.2e}"


@pytest.mark.parametrize("case", SHAPES["grouped_masked"], ids=lambda c: f"{c['groups']}x{c['expected_m']}x{c['n']}x{c['k']}")
def test_masked_grouped_gemm_matches_reference(case):
    g, max_m, n, k = case["groups"], case["max_m"], case["n"], case["k"]
    x, w, a, b = masked_inputs(g, max_m, n, k)
    rng = random.Random(g * n)
    masked_m = torch.tensor([int(case["expected_m"] * rng.uniform(0.7, 1.3)) for _ in range(g)],
                            device="cuda", dtype=torch.int32)
    d = torch.full((g, max_m, n), POISON, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, case["expected_m"])
    check_masked(x, w, d, masked_m)


@pytest.mark.parametrize("masked", [[0, 0], [1, 0, 64, 65], [256] * 3, [3] * 64],
                         ids=["all-zero", "mixed", "full", "G64"])
def test_masked_grouped_gemm_edge_cases(masked):
    g, max_m = len(masked), 256
    x, w, a, b = masked_inputs(g, max_m, 576, 512)
    masked_m = torch.tensor(masked, device="cuda", dtype=torch.int32)
    d = torch.full((g, max_m, 576), POISON, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, max(1, max(masked)))
    check_masked(x, w, d, masked_m)


def test_masked_gemm_cuda_graph_replays_with_new_masked_m():
    g, max_m, n, k = 4, 512, 2112, 1024
    x, w, a, b = masked_inputs(g, max_m, n, k)
    masked_m = torch.tensor([100, 200, 300, 400], device="cuda", dtype=torch.int32)
    d = torch.full((g, max_m, n), POISON, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 256)      # compile + load outside
    stats_before = dgemm.jit.stats()["compiles"]
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 256)
    for values in ([512, 0, 17, 256], [1, 2, 3, 4], [0, 0, 0, 0], [300, 500, 129, 64]):
        masked_m.copy_(torch.tensor(values, dtype=torch.int32))
        d.fill_(POISON)
        graph.replay()
        torch.cuda.synchronize()
        check_masked(x, w, d, masked_m)
    assert dgemm.jit.stats()["compiles"] == stats_before


def test_masked_m_above_max_m_is_clamped_to_max_m():
    g, max_m = 2, 128
    x, w, a, b = masked_inputs(g, max_m, 256, 256)
    masked_m = torch.tensor([1000, 5], device="cuda", dtype=torch.int32)
    d = torch.full((g, max_m, 256), POISON, device="cuda", dtype=torch.bfloat16)
    dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 128)
    torch.cuda.synchronize()
    check_masked(x, w, d, torch.tensor([128, 5]))

