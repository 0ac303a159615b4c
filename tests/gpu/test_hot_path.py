"""The hot path on a GPU: calls that reuse a launch plan with other tensors (re-pointed TMA maps
through cuTensorMapReplaceAddress), row-major A scales, d=None, the grouped layouts, clusters
(cuLaunchKernelEx through ctypes), CUDA graph capture of a planned call, and the launches'
context: a thread that never touched CUDA, threads on their own streams, a second device.
Every result against the float32 reference, outputs poisoned first."""
from __future__ import annotations

import contextlib
import threading

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


def _in_thread(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as exc:         # noqa: BLE001  reported by the caller
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the call hung"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("cluster", [False, True])
def test_a_thread_that_never_touched_cuda_launches_into_the_right_context(cluster):
    # The ctypes launch (and cuTensorMapReplaceAddress) use whatever context is current on the
    # calling thread; a fresh thread has none until something makes the primary one current.
    m, n, k = (512, 1024, 1024) if cluster else (64, 1024, 2048)
    case, other = random_dense(m, n, k), random_dense(m, n, k)
    d = poisoned(m, n)
    tile = (heuristics.forced_tile(128, 128, 2, multicast_on_a=False) if cluster
            else contextlib.nullcontext())
    with tile:
        dgemm.fp8_gemm_nt(case.a, case.b, d)               # loaded and planned on this thread
        outs = [poisoned(m, n) for _ in range(2)]
        # First call of the thread (full path, new plan), then its fast path, re-pointed.
        _in_thread(lambda: [dgemm.fp8_gemm_nt(c.a, c.b, o)
                            for c, o in zip((other, case), outs)])
    torch.cuda.synchronize()
    check(outs[0], other.ref, "fresh thread, first call")
    check(outs[1], case.ref, "fresh thread, fast path")


def test_threads_on_their_own_streams_launch_their_own_tensors():
    m, n, k = 64, 1024, 2048
    dgemm.fp8_gemm_nt(random_dense(m, n, k).a, random_dense(m, n, k).b, poisoned(m, n))
    cases = [random_dense(m, n, k) for _ in range(4)]
    outs = [[poisoned(m, n) for _ in range(20)] for _ in cases]
    torch.cuda.synchronize()
    barrier = threading.Barrier(len(cases))
    errors = []

    def work(i):
        try:
            stream = torch.cuda.Stream()
            barrier.wait(timeout=60)
            with torch.cuda.stream(stream):
                for d in outs[i]:
                    dgemm.fp8_gemm_nt(cases[i].a, cases[i].b, d)
            stream.synchronize()
        except BaseException as exc:         # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for i, case in enumerate(cases):
        for j, d in enumerate(outs[i]):
            check(d, case.ref, f"thread {i} call {j}")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_another_device_than_the_current_one():
    # torch's current device stays 0; the kernel, its stream and its maps belong to device 1.
    m, n, k = 64, 1024, 2048
    case = random_dense(m, n, k, device="cuda:1")
    outs = [poisoned(m, n, device="cuda:1") for _ in range(2)]
    with torch.cuda.device(0):
        for d in outs:
            dgemm.fp8_gemm_nt(case.a, case.b, d)
    torch.cuda.synchronize(1)
    for d in outs:
        check(d, case.ref, "cuda:1 from current device 0")
