"""CUDA graphs, torch.compile and the DeepGEMM drop-in on a GPU.

Every GEMM captures and replays after `dgemm.warmup` (replays read new inputs copied into the
captured buffers, and are checked against the float32 reference); a call whose kernel is not
loaded raises KernelNotWarmError during capture instead of breaking it; torch.compile with
fullgraph=True gives the eager results; vLLM's warm-up sequence (fp8_gemm_nt over M with
disable_ue8m0_cast=True) through `dgemm.compat.deep_gemm` is correct.
"""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

import dgemm
from dgemm.compat import deep_gemm
from dgemm.jit import KernelNotWarmError

from helpers import (DIFF_BAR, calc_diff_rows, poisoned, random_contiguous, random_dense,
                     random_masked, unwritten_count)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0),
    reason="needs an sm_80 or newer GPU")


def capture(fn):
    """A CUDA graph of `fn()` (its output kept), captured on a side stream as torch requires."""
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def refill(static: tuple, fresh: tuple) -> None:
    for dst, src in zip(static, fresh):
        dst.copy_(src)


# --- capture and replay ---------------------------------------------------------------------------
@pytest.mark.parametrize("scales", ["pre-transformed", "row-major", "d=None"])
def test_fp8_gemm_nt_captures_and_replays_after_warmup(scales):
    m, n, k = 64, 2112, 7168
    report = dgemm.warmup("fp8_gemm_nt", m=[m], n=n, k=k)
    assert len(report.specs) == 1
    case = random_dense(m, n, k)
    a = (case.a[0], dgemm.get_mn_major_tma_aligned_tensor(case.a[1])) \
        if scales == "pre-transformed" else (case.a[0], case.a[1].clone())
    d = poisoned(m, n)
    graph, out = capture(lambda: dgemm.fp8_gemm_nt(a, case.b) if scales == "d=None"
                         else dgemm.fp8_gemm_nt(a, case.b, d))
    for _ in range(2):                              # replays read whatever the buffers hold
        fresh = random_dense(m, n, k)
        fresh_scales = (dgemm.get_mn_major_tma_aligned_tensor(fresh.a[1])
                        if scales == "pre-transformed" else fresh.a[1])
        refill((a[0], a[1], case.b[0], case.b[1]), (fresh.a[0], fresh_scales, *fresh.b))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert unwritten_count(out) == 0
        diff = dgemm.calc_diff(out, fresh.ref)
        assert diff < DIFF_BAR, f"{scales}: calc_diff {diff:.2e} after replay"


def test_contiguous_grouped_gemm_captures_and_replays_after_warmup():
    rows, n, k = [100, 0, 300, 128], 4096, 7168
    case = random_contiguous(rows, n, k)
    m_sum = case.a[0].shape[0]
    dgemm.warmup("m_grouped_fp8_gemm_nt_contiguous", m=[m_sum], n=n, k=k, num_groups=len(rows))
    d = poisoned(m_sum, n)
    graph, _ = capture(lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d,
                                                                      case.m_indices))
    fresh = random_contiguous(rows, n, k)
    refill((case.a[0], case.a[1], case.b[0], case.b[1], case.m_indices),
           (*fresh.a, *fresh.b, fresh.m_indices))
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert unwritten_count(d, fresh.valid) == 0
    assert calc_diff_rows(d, fresh.ref, fresh.valid) < DIFF_BAR


def test_masked_grouped_gemm_replays_with_new_masked_m_values():
    groups, max_m, n, k = 4, 256, 4096, 7168
    case = random_masked([10, 256, 0, 77], max_m, n, k)
    dgemm.warmup("m_grouped_fp8_gemm_nt_masked", m=[128], n=n, k=k, num_groups=groups)
    d = poisoned(groups, max_m, n)
    graph, _ = capture(lambda: dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d,
                                                                  case.masked_m, 128))
    fresh = random_masked([200, 3, 128, 0], max_m, n, k)    # masked_m is read on the GPU
    refill((case.a[0], case.a[1], case.b[0], case.b[1], case.masked_m),
           (*fresh.a, *fresh.b, fresh.masked_m))
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert unwritten_count(d, fresh.valid) == 0
    assert calc_diff_rows(d, fresh.ref, fresh.valid) < DIFF_BAR


def test_one_warmup_over_a_range_serves_a_capture_at_every_m_of_it():
    n, k = 576, 7168
    report = dgemm.warmup("fp8_gemm_nt", m="1-256", n=n, k=k)
    assert report.problems == 256 and len(report.specs) < 256
    for m in (1, 17, 64, 129, 256):
        case = random_dense(m, n, k)
        d = poisoned(m, n)
        graph, _ = capture(lambda: dgemm.fp8_gemm_nt(case.a, case.b, d))
        graph.replay()
        torch.cuda.synchronize()
        assert dgemm.calc_diff(d, case.ref) < DIFF_BAR, f"m={m}"


# --- the capture-time error -----------------------------------------------------------------------
def test_a_capture_that_would_load_a_kernel_raises_naming_the_shape_and_the_warmup():
    m, n, k = 96, 1536, 7168          # no other test of this process loads this spec first
    case = random_dense(m, n, k)
    d = poisoned(m, n)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with pytest.raises(KernelNotWarmError, match=rf"fp8_gemm_nt: m={m}, n={n}, k={k} .*"
                                                 rf"dgemm.warmup\('fp8_gemm_nt'"):
        with torch.cuda.graph(graph):
            dgemm.fp8_gemm_nt(case.a, case.b, d)
    # The capture ended cleanly: the same call works eagerly, and captures once warm.
    dgemm.fp8_gemm_nt(case.a, case.b, d)
    assert dgemm.calc_diff(d, case.ref) < DIFF_BAR
    graph, _ = capture(lambda: dgemm.fp8_gemm_nt(case.a, case.b, d))
    graph.replay()
    torch.cuda.synchronize()


def test_a_grouped_capture_without_warmup_raises_too():
    case = random_masked([5, 9], 64, 512, 1024)
    d = poisoned(2, 64, 512)
    with pytest.raises(KernelNotWarmError, match=r"expected_m=32, n=512, k=1024, num_groups=2"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, 32)


# --- torch.compile --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_gives_the_eager_results(backend):
    if backend == "inductor":
        pytest.importorskip("triton")
    torch._dynamo.reset()
    dense = random_dense(200, 2112, 7168)
    masked = random_masked([30, 64], 64, 512, 1024)

    def layer(dense_a, dense_b, masked_a, masked_b, masked_m):
        out = dgemm.fp8_gemm_nt(dense_a, dense_b)
        d = torch.zeros(2, 64, 512, dtype=torch.bfloat16, device="cuda")
        dgemm.m_grouped_fp8_gemm_nt_masked(masked_a, masked_b, d, masked_m, 32)
        return out * 2, d

    arguments = (dense.a, dense.b, masked.a, masked.b, masked.masked_m)
    eager = layer(*arguments)
    compiled = torch.compile(layer, backend=backend, fullgraph=True)(*arguments)
    for got, want in zip(compiled, eager):
        assert torch.equal(got, want)


# --- the DeepGEMM drop-in -------------------------------------------------------------------------
def test_vllms_warmup_sequence_through_the_deep_gemm_drop_in_is_correct():
    """vLLM warms DeepGEMM up by calling fp8_gemm_nt for every M with disable_ue8m0_cast=True
    and A scales made MN-major with get_mn_major_tma_aligned_tensor."""
    n, k = 2112, 7168
    for m in (1, 7, 64, 128, 257, 1000, 4096):
        case = random_dense(m, n, k)
        a = (case.a[0], deep_gemm.get_mn_major_tma_aligned_tensor(case.a[1]))
        d = poisoned(m, n)
        assert deep_gemm.fp8_gemm_nt(a, case.b, d, disable_ue8m0_cast=True) is None
        assert unwritten_count(d) == 0
        assert dgemm.calc_diff(d, case.ref) < DIFF_BAR, f"m={m}"


def test_the_contiguous_drop_in_with_its_old_keyword_is_correct():
    case = random_contiguous([64, 200], 512, 1024)
    d = poisoned(case.a[0].shape[0], 512)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, m_indices=case.m_indices,
                                               disable_ue8m0_cast=True)
    assert calc_diff_rows(d, case.ref, case.valid) < DIFF_BAR
