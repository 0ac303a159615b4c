"""Kernel selection: (kind, m, n, k, groups, SMs, arch) -> KernelSpec, over the kernel families.

Pure Python and GPU-free, so a CPU-only prewarm host computes exactly the specs (and therefore
the cache keys) that a GPU rank will ask for. Each family (`dgemm.kernels`) owns its own choice;
this module validates the request, routes it to the family for the arch, and offers
`forced_tile`, the public hook with which benchmarks and tests run a tile of their choosing.
"""
from __future__ import annotations

import contextlib
from typing import Optional

from .jit import state
from .kernels import family as kernel_family
from .kernels import hopper_fp8, hopper_wgrad, portable_fp8, portable_wgrad
from .kernels.spec import FORMAT_VERSION, KernelSpec

KINDS = ("fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked")
# The weight-gradient GEMMs (recipe (1, 1, 128)): their own kernel families, K at run time.
# `k` of a k-grouped problem is the K of one group (any: it does not enter the spec).
WGRAD_KINDS = ("fp8_gemm_nt_wgrad", "k_grouped_fp8_gemm_nt_contiguous")
GEMM_TYPES = {
    "fp8_gemm_nt": "normal",
    "m_grouped_fp8_gemm_nt_contiguous": "grouped_contiguous",
    "m_grouped_fp8_gemm_nt_masked": "grouped_masked",
    "fp8_gemm_nt_wgrad": "normal",
    "k_grouped_fp8_gemm_nt_contiguous": "normal",
}
BLOCK_K = hopper_fp8.BLOCK_K       # one FP8 scale block along K; fixed by the scaling recipe

# (block_m, block_n, num_tma_multicast, multicast_on_a, k_split) set by `forced_tile`, or None.
_forced = state.Value("heuristics.forced_tile", None)


def family_for(arch: str) -> str:
    """The family that serves GPUs of `arch` natively: the sm_90a kernel on Hopper, the
    portable one elsewhere."""
    return hopper_fp8.NAME if arch in hopper_fp8.ARCHS else portable_fp8.NAME


def select(kind: str, m: int, n: int, k: int, num_groups: int = 1, num_sms: int = 132,
           arch: str = "sm_90a", family: Optional[str] = None) -> KernelSpec:
    """Pick the kernel for one call. `m` is the (expected) rows per group for grouped kinds
    (the masked layout's `expected_m`, the contiguous layout's total rows). `family` forces a
    kernel family (e.g. the portable one as an oracle on Hopper); default: `family_for(arch)`."""
    if kind not in GEMM_TYPES:
        raise ValueError(f"unknown kernel kind {kind!r}; expected one of "
                         f"{', '.join(KINDS + WGRAD_KINDS)}")
    for name, value in (("m", m), ("n", n), ("k", k), ("num_groups", num_groups),
                        ("num_sms", num_sms)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"select: {name} must be a positive int; got {value!r}")
    if k % BLOCK_K != 0:
        raise ValueError(f"select: k must be a multiple of {BLOCK_K}; got {k}")
    if kind in WGRAD_KINDS:
        return _select_wgrad(m, n, k, num_groups, num_sms, arch, family)
    name = family or family_for(arch)
    if name == hopper_fp8.NAME and arch not in hopper_fp8.ARCHS:
        raise ValueError(f"select: the {name} kernel runs on {', '.join(hopper_fp8.ARCHS)} "
                         f"only; got arch {arch!r}")
    spec = kernel_family(name).select(GEMM_TYPES[kind], m, n, k, num_groups, num_sms, arch)
    forced = _forced.get()
    if forced is not None and spec.kernel == hopper_fp8.NAME:
        spec = hopper_fp8.with_tile(spec, *forced)
    return spec


def wgrad_family_for(arch: str, family: Optional[str] = None) -> str:
    """The weight-gradient family for `arch`; forcing the portable forward family (the oracle,
    DGEMM_FORCE_PORTABLE) forces the portable wgrad family too."""
    if family in (portable_fp8.NAME, portable_wgrad.NAME):
        return portable_wgrad.NAME
    if family in (hopper_fp8.NAME, hopper_wgrad.NAME) or family is None:
        return hopper_wgrad.NAME if arch in hopper_wgrad.ARCHS else portable_wgrad.NAME
    raise ValueError(f"select: unknown kernel family {family!r}")


def _select_wgrad(m: int, n: int, k: int, num_groups: int, num_sms: int, arch: str,
                  family: Optional[str]) -> KernelSpec:
    name = wgrad_family_for(arch, family)
    if name == hopper_wgrad.NAME and arch not in hopper_wgrad.ARCHS:
        raise ValueError(f"select: the {name} kernel runs on {', '.join(hopper_wgrad.ARCHS)} "
                         f"only; got arch {arch!r}")
    return kernel_family(name).select("normal", m, n, k, num_groups, num_sms, arch)


def candidates(kind: str, m: int, n: int, k: int, num_groups: int = 1, num_sms: int = 132,
               count: int = 4) -> list:
    """The sm_90a cost model's `count` best specs for one call, best first (the first is
    `select`'s pick), then, for a dense call with long K and few tiles, the K-split pair that
    the model cannot rank (`hopper_fp8.k_split_candidate`): what benchmarks time to check the
    model, and what the autotuner chooses among."""
    select(kind, m, n, k, num_groups, num_sms)               # validates the request
    return hopper_fp8.candidates(GEMM_TYPES[kind], m, n, k, num_groups, num_sms, count)


@contextlib.contextmanager
def forced_tile(block_m: int, block_n: int, num_tma_multicast: int = 1,
                multicast_on_a: bool = True, k_split: int = 1):
    """Within the block, every sm_90a GEMM call runs a (block_m x block_n) tile at the
    pipeline depth the heuristic would use for it, in clusters of `num_tma_multicast` CTAs
    sharing A (or B when `multicast_on_a` is False) or, with `k_split` 2, in pairs of CTAs
    that split each tile's K blocks (the plain GEMM only), whatever `select` would pick. For
    benchmarks and tests; process-wide (not per thread); blocks do not nest."""
    hopper_fp8.check_tile(block_m, block_n, num_tma_multicast, k_split)
    if _forced.get() is not None:
        raise RuntimeError("forced_tile: a tile is already forced; blocks do not nest")
    _forced.set((block_m, block_n, num_tma_multicast, multicast_on_a, k_split))
    try:
        yield
    finally:
        _forced.set(None)


__all__ = ["KINDS", "WGRAD_KINDS", "GEMM_TYPES", "wgrad_family_for", "BLOCK_K", "FORMAT_VERSION", "KernelSpec", "family_for",
           "select", "candidates", "forced_tile"]
