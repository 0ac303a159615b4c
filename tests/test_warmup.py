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
from dgemm.kernels import hopper_wgrad

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
    (dict(manifest="deepseek_v3", recipe=(1, 1, 128)), r"not both"),
    (dict(kind="fp8_gemm_nt", m=[4096], recipe=(1, 1, 128)), r"needs m and n"),
    (dict(kind="fp8_gemm_nt", m=[4096], n=7168, k=4000, recipe=(1, 1, 128)),
     r"k \(the tokens\) must be a multiple of 128"),
    (dict(kind="fp8_gemm_nt", m=[4096], n=7168, num_groups=2, recipe=(1, 1, 128)),
     r"has no groups"),
    (dict(kind="fp8_gemm_nt", m=[4096], n=7168, recipe=(1, 1, 64)), r"recipe \(1, 1, 64\) is "
                                                                      r"not supported"),
    (dict(kind="m_grouped_fp8_gemm_nt_masked", m=[64], n=256, k=256, num_groups=2,
          recipe=(1, 1, 128)), r"applies to fp8_gemm_nt"),
    (dict(kind="k_grouped_fp8_gemm_nt_contiguous", m=[64], n=256, recipe=(1, 128, 128)),
     r"weight-gradient GEMM; its recipe is \(1, 1, 128\)"),
    (dict(kind="k_grouped_fp8_gemm_nt_contiguous", n=256), r"needs m and n"),
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


# --- the weight-gradient GEMMs (recipe (1, 1, 128)) ----------------------------------------------
WGRAD = (1, 1, 128)


def test_a_weight_gradient_warmup_plans_one_kernel_per_m_and_n_whatever_k():
    dense = warm.plan("fp8_gemm_nt", m=[7168, 2112], n=2048, recipe=WGRAD, **HOPPER)
    assert list(dense) == sorted({heuristics.select("fp8_gemm_nt_wgrad", m, 2048, k, 1, **HOPPER)
                                  for m in (7168, 2112) for k in (128, 4096, 16384)},
                                 key=lambda spec: spec.to_json())
    assert list(dense) == list(warm.plan("fp8_gemm_nt_wgrad", m=[7168, 2112], n=2048, k=8192,
                                         **HOPPER))
    eight = warm.plan("k_grouped_fp8_gemm_nt_contiguous", m=4096, n=7168, num_groups=8,
                      **HOPPER)
    assert list(eight) == [heuristics.select("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168,
                                             2048, 8, **HOPPER)]
    assert list(eight) == list(warm.plan("k_grouped_fp8_gemm_nt_contiguous", m=4096, n=7168,
                                         k=1024, num_groups=8, recipe=WGRAD, **HOPPER))


def test_a_k_grouped_warmup_without_a_group_count_plans_the_kernel_of_every_count():
    """The group count can change the tile (hopper_wgrad.launch_waves): 4096 x 7168 runs 136
    columns alone and 128 with four groups; left out, num_groups means every count up to
    K_GROUPED_WARM_GROUPS."""
    every = warm.plan("k_grouped_fp8_gemm_nt_contiguous", m=4096, n=7168, **HOPPER)
    picks = {heuristics.select("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 128, groups,
                               **HOPPER) for groups in range(1, warm.K_GROUPED_WARM_GROUPS + 1)}
    assert set(every) == picks and {spec.block_n for spec in picks} >= {128, 136}
    assert len(every) <= len(hopper_wgrad.CANDIDATE_BLOCK_NS)


def test_a_k_grouped_warmup_over_too_many_calls_asks_for_the_group_count():
    with pytest.raises(ValueError, match=r"4096 m values x 512 group counts .* pass num_groups"):
        warm.plan("k_grouped_fp8_gemm_nt_contiguous", m="1-4096", n=7168, **HOPPER)
    planned = warm.plan("k_grouped_fp8_gemm_nt_contiguous", m="1-4096", n=7168, num_groups=8,
                        **HOPPER)
    assert sum(len(calls) for calls in planned.values()) == 4096


@pytest.fixture
def hopper_without_a_gpu(monkeypatch):
    """warmup and the wgrad calls' kernel lookup on a CPU host, as on an H100/H200: device 0
    is sm_90a with 132 SMs, and 'loading' a kernel puts a stand-in in the loader's table (what
    loader.loaded reads), so a lookup afterwards finds it as a real process would."""
    from dgemm import utils
    from dgemm.jit import env
    from dgemm.kernels import loader
    loads = []

    def load(spec, index, problem, fingerprint=None):
        if torch.cuda.is_current_stream_capturing():
            raise KernelNotWarmError(gemm.not_warm_message(problem, index))
        loads.append(spec)
        key = (spec, index, fingerprint or env.build_fingerprint())
        loader._kernels[key] = f"kernel for {spec.kernel} n={spec.n}"
        return loader._kernels[key]

    monkeypatch.setattr(warm, "_device_index", lambda device: 0)
    monkeypatch.setattr(gemm, "_device_arch", lambda index: "sm_90a")
    monkeypatch.setattr(utils, "get_num_sms_for", lambda index: 132)
    monkeypatch.setattr(gemm, "load_kernel", load)
    return loads


def _captured_lookup(monkeypatch, kind, m, n, k, groups=1):
    """The kernel a wgrad call would launch, looked up while a CUDA graph is being captured."""
    from dgemm import wgrad
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    try:
        return wgrad._kernel_for(kind, m, n, k, groups, torch.device("cuda", 0))
    finally:
        monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)


def test_after_a_weight_gradient_warmup_captured_calls_of_any_k_find_their_kernel_loaded(
        hopper_without_a_gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    report = dgemm.warmup("fp8_gemm_nt", m=[7168, 2112], n=2048, recipe=WGRAD)
    assert set(hopper_without_a_gpu) == set(report.specs)
    dgemm.warmup("k_grouped_fp8_gemm_nt_contiguous", m=4096, n=7168)
    for m, k in ((7168, 128), (7168, 16384), (2112, 4096)):
        family, spec, kernel = _captured_lookup(monkeypatch, "fp8_gemm_nt_wgrad", m, 2048, k)
        assert spec in report.specs and kernel is not None
    for k, groups in ((128, 1), (128, 4), (8192, 16), (4096, 256)):   # any K and group count
        _captured_lookup(monkeypatch, "k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, k, groups)


def test_a_k_grouped_warmup_for_one_group_count_names_the_count_a_capture_misses(
        hopper_without_a_gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    dgemm.warmup("k_grouped_fp8_gemm_nt_contiguous", m=4096, n=7168, num_groups=1)
    _captured_lookup(monkeypatch, "k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 4096, 1)
    with pytest.raises(KernelNotWarmError, match=r"num_groups=4\)"):
        _captured_lookup(monkeypatch, "k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 4096, 4)


def test_a_manifest_warmup_loads_what_the_training_calls_select(hopper_without_a_gpu,
                                                                monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    preset = manifests.load_preset("deepseek_v3")
    dgemm.warmup(manifest={"wgrad": preset["wgrad"], "k_grouped": preset["k_grouped"]})
    for m, n in preset["wgrad"]["mn"]:
        _captured_lookup(monkeypatch, "fp8_gemm_nt_wgrad", m, n, 12288)
    for entry in preset["k_grouped"]:
        _captured_lookup(monkeypatch, "k_grouped_fp8_gemm_nt_contiguous", entry["m"],
                         entry["n"], 3 * entry["k_per_group"], entry["groups"])


@pytest.mark.parametrize("kind, m, n, groups, call", [
    ("fp8_gemm_nt_wgrad", 7168, 2048, 1,
     dict(kind="fp8_gemm_nt", m=7168, n=2048, recipe=(1, 1, 128))),
    ("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 8,
     dict(kind="k_grouped_fp8_gemm_nt_contiguous", m=4096, n=7168, num_groups=8)),
])
def test_the_capture_error_of_a_weight_gradient_names_a_warmup_that_fixes_it(
        kind, m, n, groups, call, hopper_without_a_gpu, monkeypatch):
    with pytest.raises(KernelNotWarmError) as caught:
        _captured_lookup(monkeypatch, kind, m, n, 4096, groups)
    message = str(caught.value)
    named = ", ".join(f"{key}={value!r}" for key, value in call.items() if key != "kind")
    assert f"dgemm.warmup({call['kind']!r}, {named})" in message
    dgemm.warmup(**call)                        # the warm-up the message names ...
    _captured_lookup(monkeypatch, kind, m, n, 4096, groups)       # ... makes the call capturable


def test_warmup_with_autotuning_on_leaves_the_weight_gradients_to_the_heuristic(
        hopper_without_a_gpu, monkeypatch):
    monkeypatch.setenv("DGEMM_AUTOTUNE", "1")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    report = dgemm.warmup("fp8_gemm_nt", m=7168, n=2048, recipe=WGRAD)
    assert list(report.specs) == [heuristics.select("fp8_gemm_nt_wgrad", 7168, 2048, 128, 1,
                                                    **HOPPER)]
