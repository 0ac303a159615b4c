"""Launch csrc/dgemm/fp8_gemm.cuh (sm_90a): tensor maps, grid and arguments for one call.

Inputs arrive validated and in the layouts of docs/internals.md ("Kernel arguments").
"""
from __future__ import annotations

import ctypes

import torch

from ..heuristics import BLOCK_K, KernelSpec, ceil_div
from ..jit import runtime

_SWIZZLE_128B = 128
_NO_SWIZZLE = 0
# fp8_gemm_kernel(d, scales_b, grouped_layout, shape_m, tma_a, tma_b, tma_scales_a, tma_d)
_ARGS = runtime.ArgLayout(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                          runtime.TmaDescriptor, runtime.TmaDescriptor, runtime.TmaDescriptor,
                          runtime.TmaDescriptor)


_descriptors: dict = {}
_MAX_CACHED_DESCRIPTORS = 4096


def _tma_desc(ptr: int, dtype, dims: tuple, strides: tuple, box: tuple, swizzle: int):
    """runtime.make_tma_desc, memoised: a descriptor holds nothing but these values, so one
    encoded for the same address and geometry is the same descriptor (a freed and reused
    address included). Saves a driver call per operand on the hot path."""
    key = (ptr, dtype, dims, strides, box, swizzle)
    desc = _descriptors.get(key)
    if desc is None:
        if len(_descriptors) >= _MAX_CACHED_DESCRIPTORS:
            _descriptors.clear()
        desc = _descriptors[key] = runtime.make_tma_desc(ptr, dtype, dims, strides, box, swizzle)
    return desc


def _box_rows(spec: KernelSpec, tile_rows: int, shared: bool) -> int:
    """Rows of one TMA box: the whole tile, or, for the operand a cluster shares through
    multicast, the 1/num_tma_multicast slice each CTA loads for all of them."""
    return tile_rows // spec.num_tma_multicast if shared else tile_rows


def _tma_a(a: torch.Tensor, spec: KernelSpec):
    """A as a 2-D [rows, K] fp8 map (masked groups stacked along rows); 128B-swizzled boxes."""
    rows = a.numel() // spec.k
    box = _box_rows(spec, spec.block_m, spec.multicast_on_a)
    return _tma_desc(a.data_ptr(), torch.uint8, (spec.k, rows), (spec.k,), (BLOCK_K, box),
                     _SWIZZLE_128B)


def _tma_b(b: torch.Tensor, spec: KernelSpec):
    """B as a 2-D [groups * N, K] fp8 map."""
    rows = b.numel() // spec.k
    box = _box_rows(spec, spec.block_n, not spec.multicast_on_a)
    return _tma_desc(b.data_ptr(), torch.uint8, (spec.k, rows), (spec.k,), (BLOCK_K, box),
                     _SWIZZLE_128B)


def _tma_scales_a(sa: torch.Tensor, spec: KernelSpec):
    """MN-major A scales as a 2-D [K/128 (x groups), rows] fp32 map; one box = one K block
    of one tile's rows. Rows past the logical M read as zeros (TMA out-of-bounds fill)."""
    rows, k_blocks = sa.shape[-2], sa.shape[-1]
    # The layout's pitch between K blocks (and between groups, which follow one another).
    # stride(-1) means nothing when K/128 == 1; the group stride then carries it.
    if k_blocks > 1:
        row_stride = sa.stride(-1)
    elif sa.dim() == 3 and sa.shape[0] > 1:
        row_stride = sa.stride(0)
    else:
        row_stride = ceil_div(rows, 4) * 4
    outer = sa.numel() // rows                      # K/128, times groups when masked
    return _tma_desc(sa.data_ptr(), torch.float32, (rows, outer), (row_stride * 4,),
                                 (spec.block_m, 1), _NO_SWIZZLE)


def uses_tma_store(spec: KernelSpec) -> bool:
    """Mirror of kTMAStore in csrc/dgemm/fp8_gemm.cuh: with 16-byte output rows and tiles of
    whole 64-column (128-byte) swizzle chunks, D is stored through TMA (grouped layouts: the
    warpgroups whose 64 rows are all real output rows)."""
    return spec.n % 8 == 0 and spec.block_n % 64 == 0


def _tma_d(d: torch.Tensor, spec: KernelSpec):
    """D as a 2-D [rows, N] bf16 map (masked groups stacked along rows); one box = 64 rows x
    64 columns of a warpgroup's tile."""
    return _tma_desc(d.data_ptr(), torch.bfloat16, (spec.n, d.numel() // spec.n), (spec.n * 2,),
                     (64, 64), _SWIZZLE_128B)


def grid_size(spec: KernelSpec, m: int) -> int:
    """Persistent grid: one CTA per SM, fewer when the problem has fewer tiles; a multiple of
    the cluster size."""
    cluster = spec.num_tma_multicast
    if spec.gemm_type == "grouped_masked":
        return spec.num_sms - spec.num_sms % cluster   # tile count depends on masked_m (device)
    unit_m, unit_n = spec.cluster_unit
    units = (ceil_div(ceil_div(m, spec.block_m), unit_m) *
             ceil_div(ceil_div(spec.n, spec.block_n), unit_n))
    return max(1, min(spec.num_sms // cluster, units)) * cluster


def launch(spec: KernelSpec, a, sa, b, sb, d, layout, kernel=None) -> None:
    """`kernel`: an already loaded build of `spec` (benchmarks comparing kernel sources);
    default: the cached one."""
    if kernel is None:
        kernel = runtime.get_kernel(spec, a.device.index)
    shape_m = a.shape[-2]                          # M, or max_m for the masked layout
    layout_ptr = layout.data_ptr() if layout is not None else 0
    tma_a = _tma_a(a, spec)
    # Kernels that do not store through TMA ignore their last descriptor.
    tma_d = _tma_d(d, spec) if uses_tma_store(spec) else tma_a
    args = _ARGS.pack(d.data_ptr(), sb.data_ptr(), layout_ptr, shape_m,
                      tma_a, _tma_b(b, spec), _tma_scales_a(sa, spec), tma_d)
    kernel.launch((grid_size(spec, shape_m), 1, 1), args)
