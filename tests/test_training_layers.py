"""The FP8 training layers (dgemm.training) on CPU.

The autograd wiring (which operand is quantized how, the transposed weight copy for dgrad, the
token-last wgrad operands and their padding, fp32 accumulation into main_grad, the experts'
contiguous and k-grouped layouts) is checked against bf16/fp32 PyTorch with the GEMMs swapped
for an fp32 reference through the `use_gemms(reference_gemms())` seam: CPU only, no dgemm
kernel runs. What the layers hand dgemm is run through dgemm's own validation (everything but
the device check passes on CPU tensors). The kernels' numbers need a GPU:
tests/gpu/test_wgrad_gpu.py and bench/NOTES.md, training t0."""
from __future__ import annotations

import pytest
import torch

from dgemm import training
from dgemm.utils import calc_diff

BAR = 2e-3          # fp8 e4m3 with fine-grained scales against bf16/fp32: ~5e-4 measured here


@pytest.fixture
def reference():
    with training.use_gemms(training.reference_gemms()):
        yield


def _linear_case(tokens=200, in_features=256, out_features=384):
    torch.manual_seed(0)
    x = torch.randn(tokens, in_features, dtype=torch.bfloat16, requires_grad=True)
    layer = training.FP8Linear(in_features, out_features)
    dy = torch.randn(tokens, out_features, dtype=torch.bfloat16)
    return x, layer, dy


def _exact(x, weight, dy):
    x32, w32 = x.detach().float().requires_grad_(), weight.detach().float().requires_grad_()
    y = x32 @ w32.t()
    y.backward(dy.float())
    return y, x32.grad, w32.grad


@pytest.mark.parametrize("tokens", [128, 200, 1])
def test_fp8_linear_matches_fp32_in_all_three_passes(tokens, reference):
    x, layer, dy = _linear_case(tokens)
    y = layer(x)
    y.backward(dy)
    y_ref, dx_ref, dw_ref = _exact(x, layer.weight, dy)
    assert y.dtype == torch.bfloat16 and x.grad.dtype == torch.bfloat16
    assert layer.weight.grad.dtype == torch.bfloat16
    assert calc_diff(y.float(), y_ref) < BAR
    assert calc_diff(x.grad.float(), dx_ref) < BAR
    assert calc_diff(layer.weight.grad.float(), dw_ref) < BAR


def test_a_transposed_weight_in_dgrad_would_be_caught(reference, monkeypatch):
    """The test can fail: dgrad with the fprop weight copy instead of W^T breaks dx."""
    x, layer, dy = _linear_case(tokens=128, in_features=256, out_features=256)
    monkeypatch.setattr(training, "quantize_weight",
                        lambda w: (training.per_block_cast_to_fp8(w),) * 2)
    layer(x).backward(dy)
    _, dx_ref, _ = _exact(x, layer.weight, dy)
    assert calc_diff(x.grad.float(), dx_ref) > 0.1


def test_fp32_main_grad_accumulates_in_place_over_steps(reference):
    x, _, dy = _linear_case()
    layer = training.FP8Linear(256, 384, fp32_main_grad=True)
    main_grad = layer.weight.main_grad
    layer(x).backward(dy)
    layer(x).backward(2 * dy)
    _, _, dw_ref = _exact(x, layer.weight, dy)
    assert layer.weight.main_grad is main_grad and main_grad.dtype == torch.float32
    assert layer.weight.grad is None
    assert calc_diff(main_grad, 3 * dw_ref) < BAR


def test_leading_dimensions_are_flattened_to_tokens(reference):
    layer = training.FP8Linear(128, 256)
    x = torch.randn(2, 3, 128, dtype=torch.bfloat16, requires_grad=True)
    y = layer(x)
    assert y.shape == (2, 3, 256)
    y.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("build, match", [
    (lambda: training.FP8Linear(200, 256), r"in_features: feature sizes must be multiples of 128 .*got 200. Pad"),
    (lambda: training.FP8Linear(256, 100), r"out_features: feature sizes must be multiples of 128 .*got 100"),
    (lambda: training.fp8_linear(torch.randn(4, 256), torch.randn(128, 128)),
     r"x's last dim must be in_features = 128"),
    (lambda: training.fp8_linear(torch.randn(4, 128), torch.randn(128, 128),
                                 torch.zeros(128, 128, dtype=torch.bfloat16)),
     r"main_grad must be fp32")])
def test_layer_misuse_raises_a_clear_error(build, match):
    with pytest.raises(ValueError, match=match):
        build()


# --- experts ----------------------------------------------------------------------------------
def _experts_case(tokens_per_expert=(200, 0, 128, 37), in_features=256, out_features=384):
    torch.manual_seed(1)
    layer = training.FP8Experts(len(tokens_per_expert), in_features, out_features)
    m_indices, group_rows = training.contiguous_layout(list(tokens_per_expert))
    x = torch.randn(sum(group_rows), in_features, dtype=torch.bfloat16)
    x[m_indices < 0] = 1e4          # garbage in padding rows must not reach any gradient
    x.requires_grad_()
    dy = torch.randn(sum(group_rows), out_features, dtype=torch.bfloat16)
    return layer, x, m_indices, group_rows, dy


def test_the_contiguous_layout_pads_each_expert_to_128_rows():
    m_indices, group_rows = training.contiguous_layout([200, 0, 128, 1])
    assert group_rows == [256, 0, 128, 128]
    assert m_indices.dtype == torch.int32 and m_indices.shape == (512,)
    assert (m_indices[:200] == 0).all() and (m_indices[200:256] == -1).all()
    assert (m_indices[256:384] == 2).all() and m_indices[384] == 3 and (m_indices[385:] == -1).all()


def test_fp8_experts_match_per_expert_fp32_including_an_empty_expert(reference):
    layer, x, m_indices, group_rows, dy = _experts_case()
    y = layer(x, m_indices, group_rows)
    y.backward(dy)
    real = m_indices >= 0
    assert (y[~real] == 0).all()
    assert (x.grad[~real] == 0).all()
    for g in range(layer.num_experts):
        rows = m_indices == g
        w = layer.weight[g].detach().float()
        assert calc_diff(y[rows].float(), x[rows].detach().float() @ w.t()) < BAR or not rows.any()
        dw = dy[rows].float().t() @ x[rows].detach().float()
        if rows.any():
            assert calc_diff(layer.weight.grad[g].float(), dw) < BAR
            assert calc_diff(x.grad[rows].float(), dy[rows].float() @ w) < BAR
        else:
            assert (layer.weight.grad[g] == 0).all()


def test_experts_refuse_a_layout_that_does_not_match_x():
    layer, x, m_indices, group_rows, _ = _experts_case()
    with pytest.raises(ValueError, match="group_rows must be multiples of 128 that sum"):
        layer(x, m_indices, [256, 0, 128, 0])
    with pytest.raises(ValueError, match="group_rows must list 4 experts"):
        layer(x, m_indices, group_rows[:3])


# --- what the layers hand dgemm passes dgemm's validation ------------------------------------
def _passes_dgemm_checks(call) -> None:
    """dgemm validates structure, dtypes, shapes, strides and alignment before devices: a call
    on CPU tensors whose only complaint is the device passed every other check. (Fake CUDA
    tensors cannot stand in: a CPU-only torch build aborts on their copies.)"""
    with pytest.raises(RuntimeError, match="tensors must be on a CUDA device"):
        call()


def validating_gemms(calls: list) -> training.Gemms:
    import dgemm
    reference = training.reference_gemms()

    def dense(a, b):
        calls.append("fp8_gemm_nt")
        _passes_dgemm_checks(lambda: dgemm.fp8_gemm_nt(a, b))
        return reference.dense(a, b)

    def wgrad(a, b, c, d):
        calls.append("fp8_gemm_nt(recipe=(1, 1, 128))")
        _passes_dgemm_checks(lambda: dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128)))
        return reference.wgrad(a, b, c, d)

    def grouped(a, b, m_indices):
        calls.append("m_grouped_fp8_gemm_nt_contiguous")
        d = torch.zeros((a[0].shape[0], b[0].shape[1]), dtype=torch.bfloat16)
        _passes_dgemm_checks(lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices))
        return reference.grouped(a, b, m_indices)

    def k_grouped(a, b, c, d, ks):
        calls.append("k_grouped_fp8_gemm_nt_contiguous")
        layout = torch.tensor(ks, dtype=torch.int32)
        _passes_dgemm_checks(lambda: dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout,
                                                                            c=c))
        return reference.k_grouped(a, b, c, d, ks)

    return training.Gemms("validating", dense, wgrad, grouped, k_grouped)


def test_the_dgemm_seam_is_the_default():
    assert training.GEMMS[0] is training.DGEMM


@pytest.mark.parametrize("main_grad", [False, True])
def test_fp8_linear_hands_dgemm_operands_that_pass_its_checks(main_grad):
    calls = []
    x, _, dy = _linear_case(tokens=200)
    layer = training.FP8Linear(256, 384, fp32_main_grad=main_grad)
    with training.use_gemms(validating_gemms(calls)):
        layer(x).backward(dy)
    assert calls == ["fp8_gemm_nt", "fp8_gemm_nt", "fp8_gemm_nt(recipe=(1, 1, 128))"]


def test_fp8_experts_hand_dgemm_operands_that_pass_its_checks():
    calls = []
    layer, x, m_indices, group_rows, dy = _experts_case()
    with training.use_gemms(validating_gemms(calls)):
        layer(x, m_indices, group_rows).backward(dy)
    assert calls == ["m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_contiguous",
                     "k_grouped_fp8_gemm_nt_contiguous"]
