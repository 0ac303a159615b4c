"""The portable FP8 weight-gradient family (csrc/dgemm/fp8_wgrad_portable.cuh), recipe
(1, 1, 128), on any sm_80+ GPU: cp.async and mma.sync, one CTA per 64x64 output tile, K a
run-time argument. The fallback on non-Hopper GPUs and the correctness oracle for the sm_90a
wgrad family (`DGEMM_FORCE_PORTABLE=1`). UNVERIFIED on a GPU (bench/NOTES.md, training t0).
"""
from __future__ import annotations

import ctypes

from ..jit import state
from ..jit.args import ArgLayout
from ..utils import ceil_div
from .loader import get_kernel
from .portable_fp8 import compile_arch
from .spec import KernelSpec, refuse_k_split

NAME = "fp8_wgrad_portable"
HEADER = "dgemm/fp8_wgrad_portable.cuh"
BLOCK_M = BLOCK_N = 64
BLOCK_K = 128
THREADS = 128                       # header: kWgradPortableThreads
STAGES = 2                          # header: kWgradPortableStages


def num_threads(spec: KernelSpec) -> int:
    return THREADS


def smem_bytes(spec: KernelSpec) -> int:
    """Header: `fp8_wgrad_portable_smem`."""
    return STAGES * (spec.block_m + spec.block_n) * spec.block_k


def cpp_instance(spec: KernelSpec) -> str:
    args = (spec.n, spec.block_m, spec.block_n, spec.block_k, THREADS)
    return "dgemm::fp8_wgrad_portable_kernel<" + ", ".join(map(str, args)) + ">"


def plan_checks(spec: KernelSpec) -> str:
    refuse_k_split(spec)
    args = (spec.block_m, spec.block_n, spec.block_k, smem_bytes(spec), num_threads(spec))
    return "template struct dgemm::WgradPortablePlanCheck<" + ", ".join(map(str, args)) + ">;"


_selections = state.table("portable_wgrad.selections")


def select(gemm_type: str, m: int, n: int, k: int, num_groups: int, num_sms: int,
           arch: str) -> KernelSpec:
    """One fixed tile; neither M, K, the groups nor the SM count enter the spec."""
    args = (n, arch)
    spec = _selections.get(args)
    if spec is None:
        spec = _selections[args] = KernelSpec(
            kernel=NAME, gemm_type="normal", n=n, k=0, num_groups=1, block_m=BLOCK_M,
            block_n=BLOCK_N, block_k=BLOCK_K, num_stages=STAGES, num_tma_multicast=1,
            multicast_on_a=False, num_sms=0, arch=compile_arch(arch))
    return spec


# a, scales_a, b, scales_b, c, d, shape_m, shape_k
ARGS = ArgLayout(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32)


def launch_raw(spec: KernelSpec, m: int, k: int, a_ptr: int, sa_ptr: int, sa_stride: int,
               b_ptr: int, sb_ptr: int, sb_stride: int, c_ptr: int, d_ptr: int,
               kernel) -> None:
    """One M x N x K weight gradient from raw addresses. The kernel derives the scales' row
    strides from M and N (align(M, 4), align(N, 4)): the layout
    `get_mn_major_tma_aligned_tensor` gives and the k-grouped slices keep."""
    if sa_stride != ceil_div(m, 4) * 4 or sb_stride != ceil_div(spec.n, 4) * 4:
        raise ValueError(f"{NAME}: scales must be MN-major with rows padded to 4 "
                         f"(dgemm.get_mn_major_tma_aligned_tensor); got strides {sa_stride}, "
                         f"{sb_stride}")
    args = ARGS.pack(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, d_ptr, m, k)
    kernel.launch((ceil_div(m, spec.block_m), ceil_div(spec.n, spec.block_n), 1), args)


def launch(spec: KernelSpec, a, sa, b, sb, c, d, kernel=None) -> None:
    if kernel is None:
        kernel = get_kernel(spec, a.device.index)
    m, k = a.shape
    launch_raw(spec, m, k, a.data_ptr(), sa.data_ptr(), ceil_div(m, 4) * 4, b.data_ptr(),
               sb.data_ptr(), ceil_div(spec.n, 4) * 4, c.data_ptr(), d.data_ptr(), kernel)


def launch_k_grouped(spec: KernelSpec, a, sa, b, sb, c, d, ks: list, kernel=None) -> None:
    """hopper_wgrad.launch_k_grouped's contract, one launch per group with K_g > 0."""
    if kernel is None:
        kernel = get_kernel(spec, a.device.index)
    m, n = d.shape[1:]
    sa_stride, sb_stride = ceil_div(m, 4) * 4, ceil_div(n, 4) * 4
    offset = 0                                        # tokens before group g
    for g, k in enumerate(ks):
        if k == 0:
            if c is not d:
                d[g].copy_(c[g])
            continue
        kb = offset // BLOCK_K
        launch_raw(spec, m, k, a.data_ptr() + offset * m, sa.data_ptr() + kb * sa_stride * 4,
                   sa_stride, b.data_ptr() + offset * n, sb.data_ptr() + kb * sb_stride * 4,
                   sb_stride, c[g].data_ptr(), d[g].data_ptr(), kernel)
        offset += k
