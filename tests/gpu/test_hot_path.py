"""The hot path on a GPU: calls that reuse a launch plan with other tensors (re-pointed TMA maps
through cuTensorMapReplaceAddress), row-major A scales, d=None, the grouped layouts, clusters
(cuLaunchKernelEx through ctypes) and CUDA graph capture of a planned call: every result
against the float32 reference, outputs poisoned first."""
from __future__ import annotations

import pytest
import torch

import dgemm
from dgemm import heuristics
from dgemm.kernels import plans

from helpers import (DIFF_BAR, calc_diff_rows, poisoned, random_contiguous, random_dense,
                     random_masked, unwritten_count)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90 (Hopper) GPU")


def check(d, ref, what):
    assert unwritten_count(d) == 0, f"{what}: unwritten output elements"
    diff = dgemm.calc_diff(d, ref)
    assert diff < DIFF_BAR, f"{what}: calc_diff {diff:.2e}"


@pytest.mark.parametrize("m,n,k", [(64, 2112, 7168), (200, 512, 1536), (7, 4096, 512)])
def test_one_plan_serves_fresh_tensors_of_its_shape(m, n, k):
    cases = [random_dense(m, n, k) for _ in range(3)]
    outs = []
    for round_ in range(2):                  # the second round re-points to earlier tensors
        for i, case in enumerate(cases):
            d = poisoned(m, n)
            dgemm.fp8_gemm_nt(case.a, case.b, d)
            outs.append((d, case.ref, f"{m}x{n}x{k} case {i} round {round_}"))
    for d, ref, what in outs:
        check(d, ref, what)


def test_row_major_and_pre_transformed_scales_agree_call_after_call():
    case = random_dense(64, 2112, 7168)
    pre = (case.a[0], dgemm.get_mn_major_tma_aligned_tensor(case.a[1]))
    for _ in range(3):
        d_rows, d_pre = poisoned(64, 2112), poisoned(64, 2112)
        dgemm.fp8_gemm_nt(case.a, case.b, d_rows)     # row-major: copied on every call
        dgemm.fp8_gemm_nt(pre, case.b, d_pre)
        check(d_rows, case.ref, "row-major scales")
        assert torch.equal(d_rows, d_pre)


def test_d_none_returns_a_fresh_correct_output_each_call():
    case = random_dense(64, 1024, 2048)
    first = dgemm.fp8_gemm_nt(case.a, case.b)
    second = dgemm.fp8_gemm_nt(case.a, case.b)
    assert first.data_ptr() != second.data_ptr()
    check(first, case.ref, "d=None first")
    check(second, case.ref, "d=None second")


def test_grouped_plans_follow_new_layout_tensors():
    for rows in ([100, 30], [5, 250]):
        case = random_contiguous(rows, 512, 1024)
        d = poisoned(case.a[0].shape[0], 512)
        dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, case.m_indices)
        assert calc_diff_rows(d, case.ref, case.valid) < DIFF_BAR
    for masked in ([64, 3, 0, 40], [1, 64, 64, 17]):
        case = random_masked(masked, 64, 512, 1024)
        d = poisoned(4, 64, 512)
        dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, 64)
        assert calc_diff_rows(d, case.ref, case.valid) < DIFF_BAR


def test_cluster_launch_through_the_plan():
    with heuristics.forced_tile(128, 128, 2, multicast_on_a=False):
        for _ in range(2):
            case = random_dense(512, 1024, 1024)
            d = poisoned(512, 1024)
            dgemm.fp8_gemm_nt(case.a, case.b, d)
            check(d, case.ref, "2-CTA clusters sharing B")


def test_a_planned_call_captures_and_replays_with_the_captured_pointers():
    case = random_dense(64, 1024, 2048)
    d = poisoned(64, 1024)
    dgemm.fp8_gemm_nt(case.a, case.b, d)                   # plan built outside the capture
    other = random_dense(64, 1024, 2048)
    graph = torch.cuda.CUDAGraph()
    d_graph = poisoned(64, 1024)
    with torch.cuda.graph(graph):
        dgemm.fp8_gemm_nt(other.a, other.b, d_graph)       # re-pointed inside the capture
    dgemm.fp8_gemm_nt(case.a, case.b, d)                   # and back, after it
    graph.replay()
    torch.cuda.synchronize()
    check(d_graph, other.ref, "replayed")
    check(d, case.ref, "eager after capture")
    assert plans._plans, "the calls went through launch plans"
