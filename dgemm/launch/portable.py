"""Launch csrc/dgemm/fp8_gemm_portable.cuh: plain pointers, one CTA per (m, n[, group]) tile."""
from __future__ import annotations

import ctypes
from typing import Optional

import torch

from ..heuristics import KernelSpec
from ..jit import runtime

# a, scales_a, b, scales_b, d, grouped_layout, shape_m: the kernel's run-time parameters.
_ARGS = runtime.ArgLayout(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32)


def grid_for(spec: KernelSpec, shape_m: int) -> tuple:
    """(m blocks, n blocks, groups for the masked layout else 1)."""
    groups = spec.num_groups if spec.gemm_type == "grouped_masked" else 1
    return (-(-shape_m // spec.block_m), -(-spec.n // spec.block_n), groups)


def launch(spec: KernelSpec, a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor,
           sb: torch.Tensor, d: torch.Tensor, layout: Optional[torch.Tensor]) -> None:
    """Run the portable kernel on torch's current stream. Inputs are validated by dgemm.gemm:
    `a` [M, K] or [G, max_m, K] fp8, `sa` MN-major TMA-aligned fp32, `b` [(G,) N, K] fp8,
    `sb` [(G,) ceil(N/128), K/128] fp32, `d` bf16, `layout` m_indices / masked_m / None."""
    shape_m = a.shape[-2]
    kernel = runtime.get_kernel(spec, a.device.index)
    args = _ARGS.pack(a.data_ptr(), sa.data_ptr(), b.data_ptr(), sb.data_ptr(), d.data_ptr(),
                      0 if layout is None else layout.data_ptr(), shape_m)
    kernel.launch(grid_for(spec, shape_m), args)
