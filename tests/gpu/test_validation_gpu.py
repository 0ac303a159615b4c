"""Validation that needs CUDA tensors: device mismatches, the arch choice, and calls that must
never synchronise (they are captured into CUDA graphs, which fails on any host sync)."""
from __future__ import annotations

import pytest
import torch

import dgemm
from dgemm import gemm
import helpers


def test_lhs_scales_on_the_cpu_raise_runtime_error_naming_them():
    case = helpers.random_dense(64, 576, 256)
    with pytest.raises(RuntimeError, match=r"every tensor must be on cuda:\d; a\[1\] is on cpu"):
        dgemm.fp8_gemm_nt((case.a[0], case.a[1].cpu()), case.b)


def test_output_on_the_cpu_raises_runtime_error_naming_d():
    case = helpers.random_dense(64, 576, 256)
    with pytest.raises(RuntimeError, match=r"d is on cpu"):
        dgemm.fp8_gemm_nt(case.a, case.b, torch.empty(64, 576, dtype=torch.bfloat16))


def test_m_indices_on_the_cpu_raise_runtime_error():
    case = helpers.random_contiguous([100], 576, 256)
    d = torch.empty(128, 576, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"m_indices is on cpu"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, case.m_indices.cpu())


def test_masked_m_on_the_cpu_raises_runtime_error():
    case = helpers.random_masked([3, 4], 64, 576, 256)
    d = torch.empty(2, 64, 576, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"masked_m is on cpu"):
        dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m.cpu(), 4)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_two_gpus_raise_runtime_error():
    case = helpers.random_dense(64, 576, 256)
    with pytest.raises(RuntimeError, match=r"b\[0\] is on cuda:1"):
        dgemm.fp8_gemm_nt(case.a, (case.b[0].to("cuda:1"), case.b[1]))


def test_the_native_arch_follows_the_device_capability():
    major, minor = torch.cuda.get_device_capability()
    arch = gemm._device_arch(torch.cuda.current_device())
    family = dgemm.heuristics.family_for(arch)
    if (major, minor) == (9, 0):
        assert (arch, family) == ("sm_90a", "fp8_gemm")
    else:
        assert (arch, family) == (f"sm_{major}{minor}", "fp8_gemm_portable")


def test_get_num_sms_defaults_to_the_device_sm_count():
    dgemm.jit.state.reset()
    expected = torch.cuda.get_device_properties(0).multi_processor_count
    assert dgemm.get_num_sms() == expected


def test_set_num_sms_rejects_more_sms_than_the_device_has():
    available = torch.cuda.get_device_properties(0).multi_processor_count
    with pytest.raises(ValueError, match=rf"exceeds the {available} SMs"):
        dgemm.set_num_sms(available + 1)


@pytest.mark.usefixtures("force_portable")
def test_dense_and_contiguous_calls_are_capturable_so_they_never_synchronise():
    dense = helpers.random_dense(64, 576, 256)
    contiguous = helpers.random_contiguous([70, 0, 128], 576, 256)
    d_dense = torch.empty(64, 576, device="cuda", dtype=torch.bfloat16)
    d_contiguous = helpers.poisoned(contiguous.m_indices.numel(), 576)
    a_scales = dgemm.get_mn_major_tma_aligned_tensor(dense.a[1])   # no copy inside the graph

    def calls():
        dgemm.fp8_gemm_nt((dense.a[0], a_scales), dense.b, d_dense)
        dgemm.m_grouped_fp8_gemm_nt_contiguous(contiguous.a, contiguous.b, d_contiguous,
                                               contiguous.m_indices)

    calls()                                  # load kernels outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        calls()
    d_dense.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert dgemm.calc_diff(d_dense, dense.ref) < helpers.DIFF_BAR
    assert helpers.calc_diff_rows(d_contiguous, contiguous.ref,
                                  contiguous.valid) < helpers.DIFF_BAR
