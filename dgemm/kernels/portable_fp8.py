"""The portable FP8 GEMM family (csrc/dgemm/fp8_gemm_portable.cuh): cp.async and mma.sync on
any sm_80+ GPU, one CTA per output tile. The fallback on non-Hopper GPUs and the correctness
oracle for the sm_90a kernel (`DGEMM_FORCE_PORTABLE=1`).

Like every family module it owns selection, template arguments, threads, the shared-memory
plan (checked against the header at compile time: `dgemm::PortablePlanCheck`), the grid and
the launch.
"""
from __future__ import annotations

import ctypes
import re
import sys
from typing import Optional

import torch

from ..jit import state
from ..jit.args import ArgLayout
from . import plans
from .loader import current_stream, get_kernel
from .spec import CPP_GEMM_TYPE, KernelSpec, refuse_k_split

NAME = "fp8_gemm_portable"
HEADER = "dgemm/fp8_gemm_portable.cuh"
BLOCK_M = BLOCK_N = 64
BLOCK_K = 128
THREADS = 128                       # header: kPortableThreads (2 x 2 warps)
STAGES = 2                          # header: kPortableStages
_ARCH = re.compile(r"^sm_(\d+)a?$")


def compile_arch(arch: str) -> str:
    """The target this family compiles for on a GPU of `arch`. The kernel uses no
    arch-specific instruction, so on Hopper (whose native family compiles for "sm_90a") it
    builds for plain "sm_90"; any other sm_80+ arch is taken as given."""
    match = _ARCH.match(arch) if isinstance(arch, str) else None
    if match is None or int(match.group(1)) < 80:
        raise ValueError(f"select: arch must be sm_80 or newer (e.g. 'sm_90a'); got {arch!r}")
    return "sm_90" if arch == "sm_90a" else arch


def num_threads(spec: KernelSpec) -> int:
    return THREADS


def smem_bytes(spec: KernelSpec) -> int:
    """Two stages of fp8 A and B tiles; header: `fp8_gemm_portable_smem`."""
    return STAGES * (spec.block_m + spec.block_n) * spec.block_k


def cpp_instance(spec: KernelSpec) -> str:
    args = (CPP_GEMM_TYPE[spec.gemm_type], spec.n, spec.k, spec.num_groups, spec.block_m,
            spec.block_n, spec.block_k, THREADS)
    return "dgemm::fp8_gemm_portable_kernel<" + ", ".join(str(a) for a in args) + ">"


def plan_checks(spec: KernelSpec) -> str:
    refuse_k_split(spec)
    args = (spec.block_m, spec.block_n, spec.block_k, smem_bytes(spec), num_threads(spec))
    return "template struct dgemm::PortablePlanCheck<" + ", ".join(map(str, args)) + ">;"


_selections = state.table("portable_fp8.selections")


def select(gemm_type: str, m: int, n: int, k: int, num_groups: int, num_sms: int,
           arch: str) -> KernelSpec:
    """One fixed tile: the kernel is simple first, fast second. Not persistent (num_sms 0), so
    neither M nor the SM count enters the spec (memoised on what does)."""
    args = (gemm_type, n, k, num_groups, arch)
    spec = _selections.get(args)
    if spec is None:
        spec = _selections[args] = KernelSpec(
            kernel=NAME, gemm_type=gemm_type, n=n, k=k, num_groups=num_groups, block_m=BLOCK_M,
            block_n=BLOCK_N, block_k=BLOCK_K, num_stages=STAGES, num_tma_multicast=1,
            multicast_on_a=False, num_sms=0, arch=compile_arch(arch))
    return spec


# a, scales_a, b, scales_b, d, grouped_layout, shape_m: the kernel's run-time parameters.
ARGS = ArgLayout(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32)


def grid_for(spec: KernelSpec, shape_m: int) -> tuple:
    """(m blocks, n blocks, groups for the masked layout else 1)."""
    groups = spec.num_groups if spec.gemm_type == "grouped_masked" else 1
    return (-(-shape_m // spec.block_m), -(-spec.n // spec.block_n), groups)


def launch_args(spec: KernelSpec, a, sa, b, sb, d, layout) -> tuple:
    """(grid, values in `ARGS` order) of one validated call: `a` [M, K] or [G, max_m, K] fp8,
    `sa` MN-major TMA-aligned fp32, `b` [(G,) N, K] fp8, `sb` [(G,) ceil(N/128), K/128] fp32,
    `d` bf16, `layout` m_indices / masked_m / None."""
    shape_m = a.shape[-2]
    return grid_for(spec, shape_m), (a.data_ptr(), sa.data_ptr(), b.data_ptr(), sb.data_ptr(),
                                     d.data_ptr(), 0 if layout is None else layout.data_ptr(),
                                     shape_m)


def launch(spec: KernelSpec, a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor,
           sb: torch.Tensor, d: torch.Tensor, layout: Optional[torch.Tensor],
           kernel=None, stream=None) -> None:
    """Run the portable kernel on `stream` (default: torch's current stream); inputs
    validated by dgemm.gemm."""
    if kernel is None:
        kernel = get_kernel(spec, a.device.index)
    if stream is None:
        stream = current_stream(kernel.device_index)
    plans.launch(sys.modules[__name__], spec, kernel, a, sa, b, sb, d, layout, stream)
