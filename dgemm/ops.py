"""dgemm's GEMMs as PyTorch custom operators (namespace `dgemm`), so `torch.compile`,
`FakeTensorMode`, `torch.export` and dispatch modes see one opaque operator per call.

    dgemm::fp8_gemm_nt(Tensor a, Tensor sa, Tensor b, Tensor sb, Tensor(a!) d) -> ()
    dgemm::fp8_gemm_nt_alloc(Tensor a, Tensor sa, Tensor b, Tensor sb) -> Tensor
    dgemm::m_grouped_fp8_gemm_nt_contiguous(Tensor a, Tensor sa, Tensor b, Tensor sb,
                                             Tensor(a!) d, Tensor m_indices) -> ()
    dgemm::m_grouped_fp8_gemm_nt_masked(Tensor a, Tensor sa, Tensor b, Tensor sb,
                                         Tensor(a!) d, Tensor masked_m, int expected_m) -> ()
    dgemm::fp8_wgrad(Tensor a, Tensor sa, Tensor b, Tensor sb, Tensor c, Tensor(a!) d) -> ()
    dgemm::fp8_wgrad_accumulate(Tensor a, Tensor sa, Tensor b, Tensor sb, Tensor(a!) d) -> ()
    dgemm::k_grouped_fp8_wgrad(Tensor a, Tensor sa, Tensor b, Tensor sb, Tensor c,
                               Tensor(a!) d, int[] ks, Tensor grouped_layout) -> ()
    dgemm::k_grouped_fp8_wgrad_accumulate(Tensor a, Tensor sa, Tensor b, Tensor sb,
                                          Tensor(a!) d, int[] ks, Tensor grouped_layout) -> ()

The wgrad operators (recipe (1, 1, 128): `fp8_gemm_nt(..., c=c, recipe=(1, 1, 128))` and
`k_grouped_fp8_gemm_nt_contiguous`) come in two forms, because an operator may not take one
tensor as both a read input and its written output: `d = c + a . b^T` with separate `c`, and
the `_accumulate` form for `d is c` (`d += a . b^T`).

The operators that take `d` write it in place and declare so (`Tensor(a!) d`), so
functionalization (torch.compile's AOT stage) turns them into their functional form and back;
they return nothing because a custom operator's output may not alias an input.
`fp8_gemm_nt_alloc` is the `d=None` form: it returns a fresh bf16 `[m, n]` tensor.
A's scales `sa` may be row-major: the CUDA kernel brings them to the TMA layout.

This module holds the schemas and the fake (meta) implementations: shapes only, no device.
The implementations live in `dgemm.gemm`, which validates every input with the same messages
as the public functions, so a direct `torch.ops.dgemm.*` call is checked too (tensors off CUDA
raise RuntimeError). The public functions (`dgemm.fp8_gemm_nt`, ...) validate in Python before
they reach an operator, so a bad input raises the same clear exception in eager mode and under
FakeTensorMode; while torch.compile traces too, except that with fullgraph=True Dynamo reports
it as `torch._dynamo.exc.Unsupported` whose text holds dgemm's message. The operators exist once this module is imported: `dgemm.gemm` imports it, so
any use of the GEMMs registers them; `import dgemm.ops` registers them explicitly (`import
dgemm` alone imports nothing, to keep the `dgemm-cache` command fast).
"""
from __future__ import annotations

import torch

NAMESPACE = "dgemm"


def _gemm():
    """dgemm.gemm, which implements the operators (it imports this module, so not at import)."""
    from . import gemm
    return gemm


# --- schemas; each body validates (same messages as the public functions) and launches ----------
@torch.library.custom_op(f"{NAMESPACE}::fp8_gemm_nt", mutates_args=("d",))
def fp8_gemm_nt(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                d: torch.Tensor) -> None:
    _gemm().fp8_gemm_nt_op(a, sa, b, sb, d)


@torch.library.custom_op(f"{NAMESPACE}::fp8_gemm_nt_alloc", mutates_args=())
def fp8_gemm_nt_alloc(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor,
                      sb: torch.Tensor) -> torch.Tensor:
    return _gemm().fp8_gemm_nt_alloc_op(a, sa, b, sb)


@torch.library.custom_op(f"{NAMESPACE}::m_grouped_fp8_gemm_nt_contiguous", mutates_args=("d",))
def m_grouped_fp8_gemm_nt_contiguous(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor,
                                     sb: torch.Tensor, d: torch.Tensor,
                                     m_indices: torch.Tensor) -> None:
    _gemm().m_grouped_fp8_gemm_nt_contiguous_op(a, sa, b, sb, d, m_indices)


@torch.library.custom_op(f"{NAMESPACE}::m_grouped_fp8_gemm_nt_masked", mutates_args=("d",))
def m_grouped_fp8_gemm_nt_masked(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor,
                                 sb: torch.Tensor, d: torch.Tensor, masked_m: torch.Tensor,
                                 expected_m: int) -> None:
    _gemm().m_grouped_fp8_gemm_nt_masked_op(a, sa, b, sb, d, masked_m, expected_m)


@torch.library.custom_op(f"{NAMESPACE}::fp8_wgrad", mutates_args=("d",))
def fp8_wgrad(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
              c: torch.Tensor, d: torch.Tensor) -> None:
    _wgrad().fp8_wgrad_op(a, sa, b, sb, c, d)


@torch.library.custom_op(f"{NAMESPACE}::fp8_wgrad_accumulate", mutates_args=("d",))
def fp8_wgrad_accumulate(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                         d: torch.Tensor) -> None:
    _wgrad().fp8_wgrad_accumulate_op(a, sa, b, sb, d)


@torch.library.custom_op(f"{NAMESPACE}::k_grouped_fp8_wgrad", mutates_args=("d",))
def k_grouped_fp8_wgrad(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                        c: torch.Tensor, d: torch.Tensor, ks: list[int],
                        grouped_layout: torch.Tensor) -> None:
    _wgrad().k_grouped_fp8_wgrad_op(a, sa, b, sb, c, d, ks, grouped_layout)


@torch.library.custom_op(f"{NAMESPACE}::k_grouped_fp8_wgrad_accumulate", mutates_args=("d",))
def k_grouped_fp8_wgrad_accumulate(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor,
                                   sb: torch.Tensor, d: torch.Tensor, ks: list[int],
                                   grouped_layout: torch.Tensor) -> None:
    _wgrad().k_grouped_fp8_wgrad_accumulate_op(a, sa, b, sb, d, ks, grouped_layout)


def _wgrad():
    from . import wgrad
    return wgrad


# --- fake implementations: output shapes, nothing else -----------------------------------------
@fp8_gemm_nt.register_fake
def _(a, sa, b, sb, d):
    return None


@fp8_gemm_nt_alloc.register_fake
def _(a, sa, b, sb):
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


@m_grouped_fp8_gemm_nt_contiguous.register_fake
def _(a, sa, b, sb, d, m_indices):
    return None


@m_grouped_fp8_gemm_nt_masked.register_fake
def _(a, sa, b, sb, d, masked_m, expected_m):
    return None


for _op in (fp8_wgrad, fp8_wgrad_accumulate, k_grouped_fp8_wgrad,
            k_grouped_fp8_wgrad_accumulate):
    _op.register_fake(lambda *args: None)


# The overloads the public functions call (an OpOverload skips the packet's overload lookup).
FP8_GEMM_NT = torch.ops.dgemm.fp8_gemm_nt.default
FP8_GEMM_NT_ALLOC = torch.ops.dgemm.fp8_gemm_nt_alloc.default
M_GROUPED_CONTIGUOUS = torch.ops.dgemm.m_grouped_fp8_gemm_nt_contiguous.default
M_GROUPED_MASKED = torch.ops.dgemm.m_grouped_fp8_gemm_nt_masked.default
FP8_WGRAD = torch.ops.dgemm.fp8_wgrad.default
FP8_WGRAD_ACCUMULATE = torch.ops.dgemm.fp8_wgrad_accumulate.default
K_GROUPED_WGRAD = torch.ops.dgemm.k_grouped_fp8_wgrad.default
K_GROUPED_WGRAD_ACCUMULATE = torch.ops.dgemm.k_grouped_fp8_wgrad_accumulate.default

__all__ = ["NAMESPACE", "fp8_gemm_nt", "fp8_gemm_nt_alloc", "m_grouped_fp8_gemm_nt_contiguous",
           "m_grouped_fp8_gemm_nt_masked", "fp8_wgrad", "fp8_wgrad_accumulate",
           "k_grouped_fp8_wgrad", "k_grouped_fp8_wgrad_accumulate"]
