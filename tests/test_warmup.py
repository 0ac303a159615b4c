"""`dgemm.warmup` and the capture-time check, on CPU: the warm-up plans with prewarm's
enumeration and dedupe (one spec serves many M), malformed arguments raise ValueError, and a
kernel that would have to be loaded while a CUDA graph is captured raises KernelNotWarmError
naming the call and the warm-up (tests/gpu/test_cuda_graphs.py does it on a GPU)."""
from __future__ import annotations

import pytest
import torch

import dgemm
from dgemm import gemm, heuristics, warm
from dgemm.jit import KernelNotWarmError
from dgemm.jobs import manifest as manifests

HOPPER = {"num_sms": 132, "arch": "sm_90a"}


def test_one_spec_serves_many_m_so_the_plan_has_far_fewer_kernels_than_calls():
    planned = warm.plan("fp8_gemm_nt", m=range(1, 1025), n=2112, k=7168, **HOPPER)
    calls = sum(len(served) for served in planned.values())
    assert calls == 1024
    assert 1 <= len(planned) < 64


def test_every_m_of_the_range_is_served_by_the_spec_its_call_selects():
    planned = warm.plan("fp8_gemm_nt", m="1-300", n=7168, k=2048, **HOPPER)
    for spec, served in planned.items():
        for problem in served:
            assert heuristics.select("fp8_gemm_nt", problem.m, 7168, 2048, 1, **HOPPER) == spec


def test_a_manifest_plan_is_exactly_what_prewarm_compiles():
    planned = warm.plan(manifest="deepseek_v3", m="1-64", contiguous_spread=0.0, **HOPPER)
    preset = manifests.load_preset("deepseek_v3")
    prewarmed = manifests.specs_for(manifests.problems(preset, list(range(1, 65)), 0.0),
                                    HOPPER["num_sms"], HOPPER["arch"])
    assert list(planned) == list(prewarmed)


def test_grouped_kinds_plan_with_their_group_count():
    planned = warm.plan("m_grouped_fp8_gemm_nt_masked", m=[64, 256], n=4096, k=7168,
                        num_groups=8, **HOPPER)
    assert {spec.num_groups for spec in planned} == {8}


def test_the_portable_family_can_be_planned_as_dgemm_force_portable_does():
    planned = warm.plan("fp8_gemm_nt", m=[64], n=256, k=256, family="fp8_gemm_portable",
                        **HOPPER)
    assert [spec.kernel for spec in planned] == ["fp8_gemm_portable"]


@pytest.mark.parametrize("arguments, message", [
    (dict(kind="fp8_gemm", m=[1], n=256, k=256), r"kind must be one of"),
    (dict(kind="fp8_gemm_nt", m=[1], n=256), r"needs m .*, n and k"),
    (dict(kind="fp8_gemm_nt", m=[1], n=256, k=200), r"k must be a multiple of 128"),
    (dict(kind="fp8_gemm_nt", m=[0, 4], n=256, k=256), r"m must be a positive int"),
    (dict(kind="fp8_gemm_nt", m=[4], n=256, k=256, num_groups=2), r"has no groups"),
    (dict(kind="fp8_gemm_nt", m="4-x", n=256, k=256), r"bad M range"),
    (dict(kind="fp8_gemm_nt", manifest="deepseek_v3", m=[4], n=256, k=256), r"not both"),
    (dict(manifest={"dense": []}), r"must be an object"),
])
def test_malformed_warmup_arguments_raise_value_error(arguments, message):
    with pytest.raises(ValueError, match=message):
        warm.plan(**arguments, **HOPPER)


def test_warmup_is_exported_from_dgemm():
    assert dgemm.warmup is warm.warmup


# --- the capture-time check -----------------------------------------------------------------------
@pytest.fixture
def capturing(monkeypatch):
    """The current stream reports a CUDA graph capture (a CPU-only torch cannot capture)."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)


def test_a_kernel_load_during_capture_raises_naming_the_shape_and_the_warmup(capturing):
    spec = heuristics.select("fp8_gemm_nt", 64, 2112, 7168, 1, **HOPPER)
    with pytest.raises(KernelNotWarmError) as caught:
        gemm.load_kernel(spec, 0, ("fp8_gemm_nt", 64, 2112, 7168, 1))
    message = str(caught.value)
    assert "fp8_gemm_nt: m=64, n=2112, k=7168 on cuda:0" in message
    assert "capturing a CUDA graph" in message
    assert "dgemm.warmup('fp8_gemm_nt', m=[...], n=2112, k=7168)" in message


def test_the_capture_error_of_a_grouped_gemm_names_its_groups(capturing):
    spec = heuristics.select("m_grouped_fp8_gemm_nt_masked", 128, 4096, 7168, 4, **HOPPER)
    with pytest.raises(KernelNotWarmError, match=r"expected_m=128, n=4096, k=7168, "
                                                 r"num_groups=4 on cuda:1 .*dgemm.warmup\("
                                                 r"'m_grouped_fp8_gemm_nt_masked'"):
        gemm.load_kernel(spec, 1, ("m_grouped_fp8_gemm_nt_masked", 128, 4096, 7168, 4))


def test_the_capture_error_is_a_dgemm_error_and_a_runtime_error():
    assert issubclass(KernelNotWarmError, dgemm.jit.DgemmError)
    assert issubclass(KernelNotWarmError, RuntimeError)


def test_warmup_during_a_capture_refuses_to_start(capturing):
    with pytest.raises(RuntimeError, match=r"call warmup before the capture starts"):
        dgemm.warmup("fp8_gemm_nt", m=[64], n=256, k=256, device=0)


def test_warmup_refuses_a_cpu_device():
    with pytest.raises(ValueError, match=r"must be a CUDA device"):
        dgemm.warmup("fp8_gemm_nt", m=[64], n=256, k=256, device="cpu")
