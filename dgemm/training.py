"""FP8 training layers on dgemm's GEMMs: an autograd-aware linear (functional `fp8_linear`
and `FP8Linear`) and an MoE experts layer on the contiguous layout (`FP8Experts`).

What is quantized where (one linear y = x W^T, x [T, in], W [out, in], T tokens):

    pass    GEMM                          A (1x128 per row, along K)   B                       out
    fprop   fp8_gemm_nt                   x        [T, in]             W   128x128 blocks      bf16 y
    dgrad   fp8_gemm_nt                   dy       [T, out]            W^T 128x128 blocks      bf16 dx
                                                                       (K-major copy [in, out])
    wgrad   fp8_gemm_nt, recipe (1,1,128) dy^T     [out, T]            x^T [in, T], 1x128      fp32 dW
                                          (K-major copy: K = tokens)   per row along tokens

The master weights stay in bf16 (the parameters); each step quantizes them afresh (128x128
blocks, and the dgrad copy is the same blocks transposed, so it costs a transpose, not a
second quantization). The weight gradient accumulates in fp32: with `fp32_main_grad=True` the
layer keeps `weight.main_grad` (fp32) and every backward adds into it in place (`d is c`,
Megatron's convention: the optimizer or a hook reads main_grad; `weight.grad` stays None);
otherwise the fp32 result is returned as the bf16 `weight.grad` autograd expects.
Activations and gradients are quantized per token (1x128 along K); the wgrad operands are
the token-last copies, so K = tokens, padded with zero tokens to a multiple of 128.

The experts layer does the same per expert: fprop and dgrad through
`m_grouped_fp8_gemm_nt_contiguous` (rows of each expert back to back, padded to 128 with
m_indices = -1), wgrad through `k_grouped_fp8_gemm_nt_contiguous` (K_g = the expert's padded
rows, from the host list `group_rows`).

The three GEMMs go through one seam, `GEMMS` (a `Gemms`): `use_gemms(reference_gemms())`
swaps them for an fp32 reference on dequantized operands, which runs on CPU. That is for the
CPU tests of the autograd wiring only; real training uses dgemm's kernels.
UNVERIFIED on a GPU (bench/NOTES.md, training t0).
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, List, Optional

import torch

from .utils import per_block_cast_to_fp8, per_token_cast_to_fp8

_BLOCK = 128
WGRAD_RECIPE = (1, 1, 128)


# --- the GEMM seam ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Gemms:
    """The GEMMs the layers call. `dense(a, b) -> bf16`; `wgrad(a, b, c, d)`: d = c + a.b^T
    (fp32); `grouped(a, b, m_indices) -> bf16` (contiguous layout, padding rows zero);
    `k_grouped(a, b, c, d, ks)`."""
    name: str
    dense: Callable
    wgrad: Callable
    grouped: Callable
    k_grouped: Callable


def _dgemm_dense(a, b):
    from . import gemm
    return gemm.fp8_gemm_nt(a, b)


def _dgemm_wgrad(a, b, c, d):
    from . import gemm
    return gemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD_RECIPE)


def _dgemm_grouped(a, b, m_indices):
    from . import gemm
    d = torch.zeros((a[0].shape[0], b[0].shape[1]), dtype=torch.bfloat16, device=a[0].device)
    return gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices)


def _dgemm_k_grouped(a, b, c, d, ks):
    from . import wgrad
    layout = torch.tensor(ks, dtype=torch.int32, device=d.device)
    return wgrad.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=c)


DGEMM = Gemms("dgemm", _dgemm_dense, _dgemm_wgrad, _dgemm_grouped, _dgemm_k_grouped)


def _rows_value(pair):
    """fp8 [rows, K] with 1x128 scales -> fp32."""
    data, scales = pair
    rows, k = data.shape
    return (data.float().view(rows, k // _BLOCK, _BLOCK) * scales.unsqueeze(-1)).view(rows, k)


def _block_value(pair):
    """fp8 [n, K] with 128x128 scales -> fp32."""
    data, scales = pair
    expanded = scales.repeat_interleave(_BLOCK, 0).repeat_interleave(_BLOCK, 1)
    return data.float() * expanded[:data.shape[0], :data.shape[1]]


def reference_gemms() -> Gemms:
    """fp32 products of the dequantized operands (same quantization, no dgemm kernel): the
    CPU tests' stand-in for the GEMMs."""
    def dense(a, b):
        return (_rows_value(a) @ _block_value(b).t()).bfloat16()

    def wgrad(a, b, c, d):
        d.copy_(c + _rows_value(a) @ _rows_value(b).t())
        return d

    def grouped(a, b, m_indices):
        x = _rows_value(a)
        out = torch.zeros((x.shape[0], b[0].shape[1]), device=x.device)
        for g in range(b[0].shape[0]):
            rows = m_indices == g
            out[rows] = x[rows] @ _block_value((b[0][g], b[1][g])).t()
        return out.bfloat16()

    def k_grouped(a, b, c, d, ks):
        m, n = d.shape[1:]
        offset = 0
        for g, k in enumerate(ks):
            a_g = (a[0][offset * m:(offset + k) * m].view(m, k),
                   a[1][:, offset // _BLOCK:(offset + k) // _BLOCK])
            b_g = (b[0][offset * n:(offset + k) * n].view(n, k),
                   b[1][:, offset // _BLOCK:(offset + k) // _BLOCK])
            d[g] = c[g] + (_rows_value(a_g) @ _rows_value(b_g).t() if k else 0)
            offset += k
        return d

    return Gemms("reference", dense, wgrad, grouped, k_grouped)


GEMMS = [DGEMM]          # the seam: a one-element list so `use_gemms` can swap it


@contextlib.contextmanager
def use_gemms(gemms: Gemms):
    """Within the block, the layers call `gemms` instead of dgemm's kernels (CPU tests)."""
    previous = GEMMS[0]
    GEMMS[0] = gemms
    try:
        yield
    finally:
        GEMMS[0] = previous


# --- quantization -------------------------------------------------------------------------------
def _pad_rows(x: torch.Tensor, multiple: int = _BLOCK) -> torch.Tensor:
    extra = -x.shape[0] % multiple
    return torch.nn.functional.pad(x, (0, 0, 0, extra)) if extra else x


def _check_features(name: str, value: int) -> None:
    if value % _BLOCK:
        raise ValueError(f"{name}: feature sizes must be multiples of {_BLOCK} (the FP8 scale "
                         f"block); got {value}. Pad the layer to the next multiple of {_BLOCK}.")


def quantize_weight(weight: torch.Tensor):
    """(fprop operand, dgrad operand): W [out, in] in 128x128 blocks, and the K-major copy of
    W^T [in, out] (the same blocks transposed: no second quantization)."""
    data, scales = per_block_cast_to_fp8(weight)
    return (data, scales), (data.t().contiguous(), scales.t().contiguous())


def _token_major_operand(x: torch.Tensor):
    """x [T, f] -> the wgrad operand: x^T [f, T_pad] K-major over tokens, 1x128 scales."""
    return per_token_cast_to_fp8(_pad_rows(x).t().contiguous())


# --- dense linear -------------------------------------------------------------------------------
class _FP8LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, main_grad):
        out_features, in_features = weight.shape
        w_fprop, w_dgrad = quantize_weight(weight)
        y = GEMMS[0].dense(per_token_cast_to_fp8(x), w_fprop)
        ctx.save_for_backward(x, w_dgrad[0], w_dgrad[1])
        ctx.main_grad = main_grad
        ctx.weight_dtype = weight.dtype
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w_t, w_t_scales = ctx.saved_tensors
        dy = dy.contiguous().to(torch.bfloat16)
        gemms = GEMMS[0]
        dx = None
        if ctx.needs_input_grad[0]:
            dx = gemms.dense(per_token_cast_to_fp8(dy), (w_t, w_t_scales)).to(x.dtype)
        grad_weight = None
        if ctx.needs_input_grad[1] or ctx.main_grad is not None:
            a = _token_major_operand(dy)          # dy^T [out, T]
            b = _token_major_operand(x)           # x^T  [in, T]
            if ctx.main_grad is not None:        # fp32 accumulation in place: d is c
                gemms.wgrad(a, b, ctx.main_grad, ctx.main_grad)
            else:
                c = torch.zeros((dy.shape[1], x.shape[1]), dtype=torch.float32,
                                device=dy.device)
                grad_weight = gemms.wgrad(a, b, c, c).to(ctx.weight_dtype)
        return dx, grad_weight, None


def fp8_linear(x: torch.Tensor, weight: torch.Tensor,
               main_grad: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y = x . weight^T with FP8 GEMMs in fprop, dgrad and wgrad (module docstring).

    Arguments:
        x: bf16 [tokens, in] (any leading dims are flattened); `in` a multiple of 128.
        weight: bf16 [out, in] master weight; `out` a multiple of 128.
        main_grad: optional fp32 [out, in]: the weight gradient is added into it in place
            and `weight.grad` is left alone.
    Returns:
        bf16 [..., out].
    """
    if not isinstance(x, torch.Tensor) or not isinstance(weight, torch.Tensor):
        raise TypeError("fp8_linear: x and weight must be torch.Tensors")
    if weight.dim() != 2:
        raise ValueError(f"fp8_linear: weight must be 2-D (out, in); got {tuple(weight.shape)}")
    out_features, in_features = weight.shape
    _check_features("fp8_linear in_features", in_features)
    _check_features("fp8_linear out_features", out_features)
    if x.shape[-1] != in_features:
        raise ValueError(f"fp8_linear: x's last dim must be in_features = {in_features}; got "
                         f"shape {tuple(x.shape)}")
    if main_grad is not None and (main_grad.dtype != torch.float32
                                  or tuple(main_grad.shape) != tuple(weight.shape)):
        raise ValueError(f"fp8_linear: main_grad must be fp32 of the weight's shape "
                         f"{tuple(weight.shape)}; got {main_grad.dtype} {tuple(main_grad.shape)}")
    leading = x.shape[:-1]
    y = _FP8LinearFunction.apply(x.reshape(-1, in_features).contiguous(), weight, main_grad)
    return y.view(*leading, out_features)


class FP8Linear(torch.nn.Module):
    """nn.Linear (no bias) on FP8 GEMMs: bf16 master weight, 1x128 activations and output
    gradients, 128x128 weight blocks, fp32 weight-gradient accumulation (module docstring).
    `fp32_main_grad`: keep `weight.main_grad` (fp32) and accumulate into it in place."""

    def __init__(self, in_features: int, out_features: int, fp32_main_grad: bool = False,
                 device=None, dtype=torch.bfloat16):
        super().__init__()
        _check_features("FP8Linear in_features", in_features)
        _check_features("FP8Linear out_features", out_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = torch.nn.Parameter(torch.empty((out_features, in_features), device=device,
                                                     dtype=dtype))
        torch.nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if fp32_main_grad:
            self.weight.main_grad = torch.zeros_like(self.weight, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fp8_linear(x, self.weight, getattr(self.weight, "main_grad", None))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, fp8"


# --- MoE experts on the contiguous layout -------------------------------------------------------
class _FP8ExpertsFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, m_indices, group_rows):
        num_experts = weight.shape[0]
        fprop, dgrad = zip(*(quantize_weight(weight[g]) for g in range(num_experts)))
        w_fprop = (torch.stack([w[0] for w in fprop]), torch.stack([w[1] for w in fprop]))
        w_dgrad = (torch.stack([w[0] for w in dgrad]), torch.stack([w[1] for w in dgrad]))
        y = GEMMS[0].grouped(per_token_cast_to_fp8(x), w_fprop, m_indices)
        ctx.save_for_backward(x, m_indices, *w_dgrad)
        ctx.group_rows = list(group_rows)
        ctx.weight_dtype = weight.dtype
        return y

    @staticmethod
    def backward(ctx, dy):
        x, m_indices, w_t, w_t_scales = ctx.saved_tensors
        gemms = GEMMS[0]
        dy = dy.contiguous().to(torch.bfloat16)
        real = (m_indices >= 0).unsqueeze(1)
        dy = dy * real                              # padding rows carry no gradient
        dx = None
        if ctx.needs_input_grad[0]:
            dx = gemms.grouped(per_token_cast_to_fp8(dy), (w_t, w_t_scales),
                               m_indices).to(x.dtype)
        grad_weight = None
        if ctx.needs_input_grad[1]:
            x = x * real
            out_features, in_features = dy.shape[1], x.shape[1]
            a_parts, sa_parts, b_parts, sb_parts = [], [], [], []
            offset = 0
            for rows in ctx.group_rows:           # K_g = this expert's (padded) rows
                if rows:
                    a_g = per_token_cast_to_fp8(dy[offset:offset + rows].t().contiguous())
                    b_g = per_token_cast_to_fp8(x[offset:offset + rows].t().contiguous())
                    a_parts.append(a_g[0].flatten()), sa_parts.append(a_g[1])
                    b_parts.append(b_g[0].flatten()), sb_parts.append(b_g[1])
                offset += rows
            empty = dy.new_empty((0,), dtype=torch.float8_e4m3fn)
            a = (torch.cat(a_parts) if a_parts else empty,
                 torch.cat(sa_parts, 1) if sa_parts else dy.new_empty((out_features, 0),
                                                                      dtype=torch.float32))
            b = (torch.cat(b_parts) if b_parts else empty,
                 torch.cat(sb_parts, 1) if sb_parts else dy.new_empty((in_features, 0),
                                                                      dtype=torch.float32))
            c = torch.zeros((len(ctx.group_rows), out_features, in_features),
                            dtype=torch.float32, device=dy.device)
            grad_weight = gemms.k_grouped(a, b, c, c, ctx.group_rows).to(ctx.weight_dtype)
        return dx, grad_weight, None, None


class FP8Experts(torch.nn.Module):
    """MoE experts (one linear each, no bias) on the contiguous layout, FP8 in all three
    passes. forward(x, m_indices, group_rows): x bf16 [M_sum, in], each expert's rows back to
    back and padded to 128 rows; m_indices int32 [M_sum] (expert of each row, -1 = padding);
    group_rows: host list of each expert's padded row count (sum = M_sum). Returns bf16
    [M_sum, out] with zero padding rows."""

    def __init__(self, num_experts: int, in_features: int, out_features: int, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        _check_features("FP8Experts in_features", in_features)
        _check_features("FP8Experts out_features", out_features)
        self.num_experts = num_experts
        self.weight = torch.nn.Parameter(torch.empty((num_experts, out_features, in_features),
                                                     device=device, dtype=dtype))
        for g in range(num_experts):
            torch.nn.init.kaiming_uniform_(self.weight.data[g], a=5 ** 0.5)

    def forward(self, x: torch.Tensor, m_indices: torch.Tensor,
                group_rows: List[int]) -> torch.Tensor:
        if len(group_rows) != self.num_experts:
            raise ValueError(f"FP8Experts: group_rows must list {self.num_experts} experts' "
                             f"row counts; got {len(group_rows)}")
        if any(r % _BLOCK for r in group_rows) or sum(group_rows) != x.shape[0]:
            raise ValueError(f"FP8Experts: group_rows must be multiples of {_BLOCK} that sum "
                             f"to x's rows ({x.shape[0]}); got {list(group_rows)}")
        return _FP8ExpertsFunction.apply(x.contiguous(), self.weight, m_indices,
                                         list(group_rows))


def contiguous_layout(tokens_per_expert: List[int], device=None):
    """(m_indices int32 [M_sum], group_rows) for experts receiving `tokens_per_expert` tokens:
    each expert's rows padded to 128, padding rows -1."""
    group_rows = [-(-t // _BLOCK) * _BLOCK for t in tokens_per_expert]
    indices: List[int] = []
    for g, (tokens, rows) in enumerate(zip(tokens_per_expert, group_rows)):
        indices += [g] * tokens + [-1] * (rows - tokens)
    return torch.tensor(indices, dtype=torch.int32, device=device), group_rows
