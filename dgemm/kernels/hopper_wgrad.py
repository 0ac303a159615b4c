"""The sm_90a FP8 weight-gradient family (csrc/dgemm/fp8_wgrad.cuh), recipe (1, 1, 128):
D (fp32) = C + A . B^T where A [M, K] and B [N, K] both carry one scale per row and 128-wide
K block. TMA loads, WGMMA, warp specialisation, a persistent grid; K is a run-time argument,
so a spec (and a kernel) serves every K of a layer and every group of the k-grouped GEMM.

Like every family module it owns selection, template arguments, threads, the shared-memory
plan (checked against the header at compile time: `dgemm::Fp8WgradPlanCheck`), the TMA
descriptors, the grid and the launch. UNVERIFIED on a GPU (bench/NOTES.md, training t0): the
tile choice below is a first guess, to be fitted to measurements.
"""
from __future__ import annotations

import ctypes

from ..jit import state
from ..jit.args import ArgLayout, TmaDescriptor
from ..utils import ceil_div
from .loader import get_kernel
from .spec import KernelSpec

NAME = "fp8_wgrad"
HEADER = "dgemm/fp8_wgrad.cuh"
ARCHS = ("sm_90a",)
BLOCK_M = 128                     # two math warpgroups of 64 rows
BLOCK_K = 128
BLOCK_NS = (64, 128)              # accumulators of 128 columns (+ the final ones) fit registers
THREADS = 128 + 256               # header: kWgradProducerThreads + kWgradMathThreads
SMEM_CAPACITY = 232_448
MAX_STAGES = 8


def num_threads(spec: KernelSpec) -> int:
    return THREADS


def smem_plan(block_m: int, block_n: int, num_stages: int) -> int:
    """Header: `fp8_wgrad_smem(...).total`: per stage the A and B tiles and both scale
    vectors, then a full and an empty barrier per stage."""
    return num_stages * (block_m * BLOCK_K + block_n * BLOCK_K + block_m * 4 + block_n * 4 + 16)


def smem_bytes(spec: KernelSpec) -> int:
    return smem_plan(spec.block_m, spec.block_n, spec.num_stages)


def num_stages(block_n: int) -> int:
    return max(s for s in range(2, MAX_STAGES + 1)
               if smem_plan(BLOCK_M, block_n, s) <= SMEM_CAPACITY)


def cpp_instance(spec: KernelSpec) -> str:
    args = (spec.n, spec.block_m, spec.block_n, spec.block_k, spec.num_stages, spec.num_sms)
    return "dgemm::fp8_wgrad_kernel<" + ", ".join(map(str, args)) + ">"


def plan_checks(spec: KernelSpec) -> str:
    check_tile(spec.block_m, spec.block_n)
    args = (spec.block_m, spec.block_n, spec.block_k, spec.num_stages, smem_bytes(spec),
            num_threads(spec))
    return "template struct dgemm::Fp8WgradPlanCheck<" + ", ".join(map(str, args)) + ">;"


def check_tile(block_m: int, block_n: int) -> None:
    if block_m != BLOCK_M or block_n not in BLOCK_NS:
        raise ValueError(f"{block_m}x{block_n} is not a tile of the {NAME} kernel: block_m is "
                         f"{BLOCK_M} and block_n one of {BLOCK_NS}")


_selections = state.table("hopper_wgrad.selections")


def select(gemm_type: str, m: int, n: int, k: int, num_groups: int, num_sms: int,
           arch: str = "sm_90a") -> KernelSpec:
    """The tile for an M x N weight gradient (K and the groups do not enter: K is a run-time
    argument, and the k-grouped GEMM runs one M x N problem per group). Fewest waves of tiles
    first, then the wider tile (half the A re-reads)."""
    args = (m, n, num_sms)
    spec = _selections.get(args)
    if spec is None:
        def score(block_n):
            tiles = ceil_div(m, BLOCK_M) * ceil_div(n, block_n)
            # A 64-column tile does ~0.55 of a 128-column tile's work per K block (guess).
            cost = 1.0 if block_n == 128 else 0.55
            return (ceil_div(tiles, num_sms) * cost, -block_n)
        block_n = min(BLOCK_NS, key=score)
        spec = _selections[args] = KernelSpec(
            kernel=NAME, gemm_type="normal", n=n, k=0, num_groups=1, block_m=BLOCK_M,
            block_n=block_n, block_k=BLOCK_K, num_stages=num_stages(block_n),
            num_tma_multicast=1, multicast_on_a=False, num_sms=num_sms, arch="sm_90a")
    return spec


# ------------------------------------------------------------------------------------------
# Launch
# ------------------------------------------------------------------------------------------
_SWIZZLE_128B = 128
_NO_SWIZZLE = 0
# fp8_wgrad_kernel(c, d, shape_m, shape_k, tma_a, tma_b, tma_scales_a, tma_scales_b)
ARGS = ArgLayout(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                 TmaDescriptor, TmaDescriptor, TmaDescriptor, TmaDescriptor)


def _desc(*args):
    from ..jit.runtime import make_tma_desc           # the driver, only on a GPU host
    return make_tma_desc(*args)


def _operand_desc(ptr: int, rows: int, k: int, box_rows: int):
    import torch
    return _desc(ptr, torch.uint8, (k, rows), (k,), (BLOCK_K, box_rows), _SWIZZLE_128B)


def _scales_desc(ptr: int, rows: int, k_blocks: int, row_stride: int, box_rows: int):
    import torch
    return _desc(ptr, torch.float32, (rows, k_blocks), (row_stride * 4,), (box_rows, 1),
                 _NO_SWIZZLE)


def grid_size(spec: KernelSpec, m: int) -> int:
    return max(1, min(spec.num_sms, ceil_div(m, spec.block_m) * ceil_div(spec.n, spec.block_n)))


def launch_raw(spec: KernelSpec, m: int, k: int, a_ptr: int, sa_ptr: int, sa_stride: int,
               b_ptr: int, sb_ptr: int, sb_stride: int, c_ptr: int, d_ptr: int,
               kernel) -> None:
    """One M x N x K weight gradient from raw addresses (the k-grouped GEMM passes each
    group's slices): A/B row-major fp8, scales MN-major with row strides `sa_stride` /
    `sb_stride` (elements between K blocks), C/D fp32 [M, N]."""
    args = ARGS.pack(c_ptr, d_ptr, m, k,
                     _operand_desc(a_ptr, m, k, spec.block_m),
                     _operand_desc(b_ptr, spec.n, k, spec.block_n),
                     _scales_desc(sa_ptr, m, k // BLOCK_K, sa_stride, spec.block_m),
                     _scales_desc(sb_ptr, spec.n, k // BLOCK_K, sb_stride, spec.block_n))
    kernel.launch((grid_size(spec, m), 1, 1), args)


def launch(spec: KernelSpec, a, sa, b, sb, c, d, kernel=None) -> None:
    """D = C + A . B^T on torch's current stream; inputs validated by dgemm.wgrad (sa, sb
    already MN-major and TMA-aligned, K > 0)."""
    if kernel is None:
        kernel = get_kernel(spec, a.device.index)
    m, k = a.shape
    launch_raw(spec, m, k, a.data_ptr(), sa.data_ptr(), ceil_div(m, 4) * 4, b.data_ptr(),
               sb.data_ptr(), ceil_div(spec.n, 4) * 4, c.data_ptr(), d.data_ptr(), kernel)
