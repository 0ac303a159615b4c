"""The implementations dgemm is timed against in the same run (docs/benchmarks.md)."""
from __future__ import annotations

from typing import Callable

import torch


def cublas_blockwise(a: tuple, b: tuple, m: int) -> Callable[[], torch.Tensor]:
    """cuBLAS's block-scaled FP8 GEMM ("cuBLAS-blk"): torch._scaled_mm with 1x128 A scales
    stored column-major and 128x128 B scales, for an (fp8, scales) pair `a` of M rows and `b`.
    Raises RuntimeError when cuBLAS refuses the shape (e.g. M not a multiple of 4) on the call."""
    a_fp8, a_scales = a
    b_fp8, b_scales = b
    sa = a_scales[:m].t().contiguous().t()           # (M, K/128), strides (1, M)
    return lambda: torch._scaled_mm(a_fp8, b_fp8.t(), scale_a=sa, scale_b=b_scales.t(),
                                    out_dtype=torch.bfloat16)


def deep_gemm_module():
    """DeepGEMM (the anchor, docs/benchmarks.md says how to build it on the GPU machine) when
    `import deep_gemm` works, else None: the benches then print no DeepGEMM column."""
    try:
        import deep_gemm
    except Exception:          # not built here, or its extension fails to load
        return None
    return deep_gemm


def deep_gemm_dense(deep_gemm, a: tuple, b: tuple, d: torch.Tensor) -> Callable[[], None]:
    """DeepGEMM's fp8_gemm_nt on the very pairs dgemm gets (A scales already MN-major and
    TMA-aligned, so no one times a layout copy), writing its own `d`."""
    return lambda: deep_gemm.fp8_gemm_nt(a, b, d)
