"""The DeepGEMM drop-in (`dgemm.compat.deep_gemm`) on a GPU, called the way vLLM calls DeepGEMM.

vLLM's warm-up (vllm/model_executor/warmup/deep_gemm_warmup.py) slices buffers of max_tokens
rows: `fp8_gemm_nt((a[:m], s[:m]), (w, ws), out[:m], disable_ue8m0_cast=True)` with row-major
A scales, and its MoE warm-up passes the contiguous layout fourth with one random expert per
128-row block; at run time its linear layers pass MN-major scales. Each form must give
calc_diff < 1e-3 against the float32 product of the unquantised inputs and write no row past
`m`. torch.compile of dgemm's GEMMs on the GPU is tests/gpu/test_cuda_graphs.py's.
"""
from __future__ import annotations

import pytest
import torch

import dgemm
from dgemm.compat import deep_gemm

from helpers import (DIFF_BAR, calc_diff_rows, poisoned, random_contiguous, random_grouped_b,
                     random_masked, unwritten_count)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0),
    reason="needs an sm_80 or newer GPU")


def test_vllms_warmup_and_runtime_calls_of_fp8_gemm_nt_are_correct():
    max_tokens, n, k = 512, 2112, 7168
    x = torch.randn(max_tokens, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    ref = x.float() @ w.float().t()
    a1q, a1q_scales = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=False)
    weight = deep_gemm.per_block_cast_to_fp8(w, use_ue8m0=False)
    out = poisoned(max_tokens, n)
    for m in (1, 7, 64, 129, 300):
        out.fill_(float("nan"))
        # Warm-up form: row-major scales and out, all slices of max_tokens-row buffers.
        assert deep_gemm.fp8_gemm_nt((a1q[:m], a1q_scales[:m]), weight, out[:m],
                                     disable_ue8m0_cast=True) is None
        torch.cuda.synchronize()
        assert unwritten_count(out[:m]) == 0, f"m={m}"
        assert unwritten_count(out[m:]) == out[m:].numel(), f"m={m}: rows past m written"
        diff = dgemm.calc_diff(out[:m], ref[:m])
        assert diff < DIFF_BAR, f"row-major scales, m={m}: calc_diff {diff:.2e}"
        # Run-time form: the layer's scales made MN-major and TMA-aligned first.
        d = poisoned(m, n)
        scales = deep_gemm.get_mn_major_tma_aligned_tensor(a1q_scales[:m])
        deep_gemm.fp8_gemm_nt((a1q[:m], scales), weight, d, disable_ue8m0_cast=True)
        assert dgemm.calc_diff(d, ref[:m]) < DIFF_BAR, f"MN-major scales, m={m}"


def test_the_contiguous_layout_fourth_by_position_or_keyword_gives_one_result():
    case = random_contiguous([64, 0, 200, 128], 512, 1024)
    outputs = []
    for kwargs in ({}, {"grouped_layout": case.m_indices}, {"m_indices": case.m_indices}):
        d = poisoned(case.a[0].shape[0], 512)
        args = (case.a, case.b, d) + (() if kwargs else (case.m_indices,))
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(*args, **kwargs, disable_ue8m0_cast=True)
        outputs.append(d)
    assert unwritten_count(outputs[0], case.valid) == 0
    assert calc_diff_rows(outputs[0], case.ref, case.valid) < DIFF_BAR
    same = [torch.equal(outputs[0].nan_to_num(), d.nan_to_num()) for d in outputs[1:]]
    assert same == [True, True]         # padding rows stay NaN in each


def test_vllms_moe_warmup_layout_one_random_expert_per_block_is_correct():
    """vLLM's MoE warm-up: no padding rows, experts in random order, a prefix of the buffers."""
    experts, n, k, rows = 4, 512, 1024, 768
    weight, w = random_grouped_b(experts, n, k)
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    a1q, a1q_scales = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=False)
    blocks = torch.randint(0, experts, (rows // 128,), device="cuda", dtype=torch.int32)
    expert_ids = blocks.repeat_interleave(128)
    ref = torch.empty(rows, n, device="cuda")
    for expert in range(experts):
        mine = expert_ids == expert
        ref[mine] = x[mine].float() @ w[expert].t()
    out = poisoned(rows, n)
    for m in (128, 384, 768):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a1q[:m], a1q_scales[:m]), weight, out[:m],
                                                   expert_ids[:m], disable_ue8m0_cast=True)
        torch.cuda.synchronize()
        assert unwritten_count(out[:m]) == 0, f"m_sum={m}"
        assert dgemm.calc_diff(out[:m], ref[:m]) < DIFF_BAR, f"m_sum={m}"


def test_the_masked_gemm_and_its_older_name_are_correct():
    case = random_masked([10, 64, 0, 33], 64, 512, 1024)
    outputs = []
    for gemm in (deep_gemm.m_grouped_fp8_gemm_nt_masked, deep_gemm.fp8_m_grouped_gemm_nt_masked):
        d = poisoned(4, 64, 512)
        gemm(case.a, case.b, d, case.masked_m, 32, disable_ue8m0_cast=True)
        outputs.append(d)
    assert unwritten_count(outputs[0], case.valid) == 0
    assert calc_diff_rows(outputs[0], case.ref, case.valid) < DIFF_BAR
    assert torch.equal(outputs[0].nan_to_num(), outputs[1].nan_to_num())
