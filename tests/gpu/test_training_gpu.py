"""dgemm.training's layers on a GPU: FP8Linear and FP8Experts with dgemm's kernels give what the
same layers give with the fp32 reference GEMMs (`reference_gemms`: the same quantization, the
products in fp32), in the forward output, the input gradient and the weight gradient, so every
operand the layers hand the kernels (the transposed dgrad copy, the token-last wgrad copies and
their padding, the k-grouped layout) is what the kernel expects. First written in training t0
without a GPU (bench/NOTES.md).
"""
from __future__ import annotations

import pytest
import torch

import dgemm
from dgemm import training
from helpers import DIFF_BAR

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0),
    reason="needs an sm_80 or newer GPU")


def _run(module, inputs: tuple, dy: torch.Tensor, weight_grad):
    x = inputs[0].detach().clone().requires_grad_(True)
    y = module(x, *inputs[1:])
    y.backward(dy)
    return y.detach().float(), x.grad.float(), weight_grad().float().clone()


def _compare(name, ours, reference):
    for what, got, want in zip(("y", "dx", "dW"), ours, reference):
        diff = dgemm.calc_diff(got, want)
        assert diff < DIFF_BAR, f"{name} {what}: calc_diff {diff:.2e}"


@pytest.mark.parametrize("main_grad", [False, True])
def test_fp8_linear_with_dgemms_kernels_matches_the_reference_gemms(main_grad):
    torch.manual_seed(0)
    layer = training.FP8Linear(512, 768, fp32_main_grad=main_grad, device="cuda")
    x = torch.randn(300, 512, device="cuda", dtype=torch.bfloat16)   # 300 tokens: padded wgrad
    dy = torch.randn(300, 768, device="cuda", dtype=torch.bfloat16)

    def weight_grad():
        return layer.weight.main_grad if main_grad else layer.weight.grad

    ours = _run(layer, (x,), dy, weight_grad)
    layer.weight.grad = None
    if main_grad:
        layer.weight.main_grad.zero_()
    with training.use_gemms(training.reference_gemms()):
        reference = _run(layer, (x,), dy, weight_grad)
    _compare("FP8Linear", ours, reference)


def test_fp8_experts_with_dgemms_kernels_match_the_reference_gemms():
    torch.manual_seed(0)
    experts = training.FP8Experts(3, 256, 384, device="cuda")
    m_indices, group_rows = training.contiguous_layout([100, 0, 260], device="cuda")
    x = torch.randn(sum(group_rows), 256, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(sum(group_rows), 384, device="cuda", dtype=torch.bfloat16)
    ours = _run(experts, (x, m_indices, group_rows), dy, lambda: experts.weight.grad)
    experts.weight.grad = None
    with training.use_gemms(training.reference_gemms()):
        reference = _run(experts, (x, m_indices, group_rows), dy, lambda: experts.weight.grad)
    _compare("FP8Experts", ours, reference)
