"""Weight-gradient GEMMs (recipe (1, 1, 128)): validate, choose the wgrad kernel family for
the device, launch.

    fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))       ->  wgrad_gemm_nt (here)
    k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks_cpu, grouped_layout, c=c)

Both operands carry one fp32 scale per row and 128-wide K block (`per_token_cast_to_fp8` of
the K-major activation and output-gradient copies); the result accumulates in fp32 onto `c`:
`d = c + a . b^T`, and `d` may be `c` (in-place accumulation of a weight gradient). K is the
token dimension; it may be 0 (then `d = c`). The kernel takes K at run time, so one kernel
serves every K of a layer and every group of the k-grouped GEMM (the Hopper kernel walks up
to 12 groups per launch; ks_cpu is on the host, so no synchronisation); the k-grouped tile
may depend on the group count (d.shape[0]), never on the tokens.

Checks follow `dgemm.gemm`'s order (TypeError for structure and dtypes, ValueError for
shapes, strides and alignment, RuntimeError for devices), and the same eager-or-operator rule:
plain eager calls run directly, anything that could observe the call (torch.compile,
FakeTensorMode, dispatch modes) goes through the `dgemm::` operators in `dgemm.ops`.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch

from . import gemm, kernels, ops, utils
from .kernels import loader

FP8 = gemm.FP8
_BLOCK = 128
WGRAD_RECIPE = (1, 1, 128)
FPROP_RECIPE = (1, 128, 128)
_TOKEN_HINT = "dgemm.per_token_cast_to_fp8 of the K-major (token-last) copy"


def check_recipe(fn: str, recipe) -> Optional[tuple]:
    """None or (1, 128, 128) -> None (the forward GEMM); (1, 1, 128) -> WGRAD_RECIPE."""
    if recipe is None:
        return None
    if (not isinstance(recipe, (tuple, list)) or len(recipe) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in recipe)):
        raise TypeError(f"{fn}: recipe must be None or a tuple of three ints (scale "
                        f"granularity of A's rows, B's rows, K); got {recipe!r}")
    recipe = tuple(recipe)
    if recipe == FPROP_RECIPE:
        return None
    if recipe == WGRAD_RECIPE:
        return WGRAD_RECIPE
    raise ValueError(f"{fn}: recipe {recipe} is not supported; use None or {FPROP_RECIPE} "
                     f"(1x128 A scales, 128x128 B scales, bf16 out) or {WGRAD_RECIPE} (1x128 "
                     f"scales on both, fp32 d = c + a . b^T)")


def _check_c_d_types(fn: str, c, d) -> None:
    if d is None:
        raise TypeError(f"{fn}: d (the fp32 output) is required with recipe {WGRAD_RECIPE}; "
                        f"pass d=c to accumulate in place")
    gemm._check_tensor_dtype(fn, "d", d, torch.float32, "the fp32 output")
    if c is None:
        raise TypeError(f"{fn}: c (the fp32 tensor to accumulate onto) is required with recipe "
                        f"{WGRAD_RECIPE}; pass c=d to accumulate in place, or a zeroed tensor")
    gemm._check_tensor_dtype(fn, "c", c, torch.float32, "accumulated onto")


def _check_c_d(fn: str, c, d, shape: tuple, meaning: str, real: bool) -> None:
    gemm._check_shape(fn, "d", d, shape, meaning)
    gemm._check_shape(fn, "c", c, shape, meaning)
    gemm._check_contiguous(fn, "d", d, real)
    gemm._check_contiguous(fn, "c", c, real)
    if c is not d and real and c.numel() and c.device == d.device and _overlap(c, d):
        raise ValueError(f"{fn}: c and d overlap in memory without being the same tensor; pass "
                         f"d=c to accumulate in place, or separate tensors")


def _overlap(x: torch.Tensor, y: torch.Tensor) -> bool:
    x0, y0 = x.data_ptr(), y.data_ptr()
    return x0 < y0 + y.numel() * 4 and y0 < x0 + x.numel() * 4


# --- dense wgrad --------------------------------------------------------------------------------
def checked_wgrad(a, b, d, c, real: Optional[bool] = None) -> tuple:
    """fp8_gemm_nt(recipe=(1, 1, 128))'s checks; returns (a, sa, b, sb, device, real)."""
    fn = "fp8_gemm_nt(recipe=(1, 1, 128))"
    a_data, a_scales = gemm._unpack_pair(fn, "a", a, _TOKEN_HINT)
    b_data, b_scales = gemm._unpack_pair(fn, "b", b, _TOKEN_HINT)
    _check_c_d_types(fn, c, d)
    if real is None:
        real = gemm._direct(a_data, a_scales, b_data, b_scales, d, c)
    m, n, k = gemm._dense_mnk(fn, a_data, b_data, "K (the tokens)")
    if k % _BLOCK:
        raise ValueError(f"{fn}: K (the tokens) must be a multiple of {_BLOCK} (0 allowed); "
                         f"got K={k}. Pad the tokens with zero rows to the next multiple of "
                         f"{_BLOCK} before the K-major copy.")
    gemm._check_shape(fn, "a[1] (scales)", a_scales, (m, k // _BLOCK), "(m, k / 128)")
    gemm._check_shape(fn, "b[1] (scales)", b_scales, (n, k // _BLOCK),
                      "(n, k / 128): one scale per row and 128 K, not per 128x128 block")
    _check_c_d(fn, c, d, (m, n), "(m, n)", real)
    gemm._check_contiguous(fn, "a[0]", a_data, real)
    gemm._check_contiguous(fn, "b[0]", b_data, real)
    device = gemm._check_devices(fn, (("a[0]", a_data), ("a[1]", a_scales), ("b[0]", b_data),
                                      ("b[1]", b_scales), ("c", c), ("d", d)))
    return a_data, a_scales, b_data, b_scales, device, real


def wgrad_gemm_nt(a, b, d, c) -> torch.Tensor:
    """fp8_gemm_nt with recipe (1, 1, 128): d = c + a . b^T in fp32 (see `dgemm.fp8_gemm_nt`)."""
    a_data, a_scales, b_data, b_scales, device, direct = checked_wgrad(a, b, d, c)
    if direct:
        _run_wgrad(a_data, a_scales, b_data, b_scales, c, d)
    elif c is d:
        ops.FP8_WGRAD_ACCUMULATE(a_data, a_scales, b_data, b_scales, d)
    else:
        ops.FP8_WGRAD(a_data, a_scales, b_data, b_scales, c, d)
    return d


def _run_wgrad(a, sa, b, sb, c, d) -> None:
    m, k = a.shape
    n = b.shape[0]
    if m == 0 or n == 0:
        return
    if k == 0:
        if c is not d:
            d.copy_(c)
        return
    family, spec, kernel = _kernel_for("fp8_gemm_nt_wgrad", m, n, k, 1, d.device)
    family.launch(spec, a, utils.get_mn_major_tma_aligned_tensor(sa), b,
                  utils.get_mn_major_tma_aligned_tensor(sb), c, d, kernel)


def _kernel_for(kind: str, m: int, n: int, k: int, num_groups: int, device: torch.device):
    index = device.index
    arch = gemm._device_arch(index)
    spec = gemm.heuristics.select(kind, m, n, max(k, _BLOCK), num_groups,
                                  utils.get_num_sms_for(index), arch, gemm._forced_family())
    fingerprint = gemm.env.build_fingerprint()
    kernel = loader.loaded(spec, index, fingerprint)
    if kernel is None:
        kernel = gemm.load_kernel(spec, index, (kind, m, n, k, num_groups), fingerprint)
    return kernels.family(spec.kernel), spec, kernel


def fp8_wgrad_op(a, sa, b, sb, c, d) -> None:
    """The implementation of the operator dgemm::fp8_wgrad."""
    a, sa, b, sb, _, _ = checked_wgrad((a, sa), (b, sb), d, c, real=True)
    _run_wgrad(a, sa, b, sb, c, d)


def fp8_wgrad_accumulate_op(a, sa, b, sb, d) -> None:
    """The implementation of the operator dgemm::fp8_wgrad_accumulate (c is d)."""
    a, sa, b, sb, _, _ = checked_wgrad((a, sa), (b, sb), d, d, real=True)
    _run_wgrad(a, sa, b, sb, d, d)


# --- k-grouped wgrad ----------------------------------------------------------------------------
def _check_ks(fn: str, ks_cpu) -> list:
    if isinstance(ks_cpu, torch.Tensor) or not isinstance(ks_cpu, (list, tuple)):
        raise TypeError(f"{fn}: ks_cpu must be a host list of ints (each group's K); got "
                        f"{type(ks_cpu).__name__}. Pass grouped_layout.tolist() once, or keep "
                        f"the list you built the layout from (reading a GPU tensor would "
                        f"synchronise)")
    if not ks_cpu:
        raise ValueError(f"{fn}: ks_cpu must name at least one group; got an empty list")
    for g, k in enumerate(ks_cpu):
        if not isinstance(k, int) or isinstance(k, bool):
            raise TypeError(f"{fn}: ks_cpu[{g}] must be an int; got {type(k).__name__}")
        if k < 0 or k % _BLOCK:
            raise ValueError(f"{fn}: ks_cpu[{g}] = {k}: each group's K must be a multiple of "
                             f"{_BLOCK} (0 allowed). Pad each group's tokens to "
                             f"{_BLOCK} with zero rows.")
    return list(ks_cpu)


def checked_k_grouped(a, b, d, ks_cpu, grouped_layout, c, recipe,
                      real: Optional[bool] = None) -> tuple:
    fn = "k_grouped_fp8_gemm_nt_contiguous"
    if check_recipe(fn, recipe) != WGRAD_RECIPE:
        raise ValueError(f"{fn}: recipe must be {WGRAD_RECIPE} (1x128 scales along K on both "
                         f"operands); got {tuple(recipe) if recipe is not None else None}")
    a_data, a_scales = gemm._unpack_pair(fn, "a", a, _TOKEN_HINT + " of each group")
    b_data, b_scales = gemm._unpack_pair(fn, "b", b, _TOKEN_HINT + " of each group")
    ks = _check_ks(fn, ks_cpu)
    gemm._check_tensor_dtype(fn, "grouped_layout", grouped_layout, torch.int32,
                             "each group's K on the GPU, equal to ks_cpu")
    _check_c_d_types(fn, c, d)
    if real is None:
        real = gemm._direct(a_data, a_scales, b_data, b_scales, d, c)
    if d.dim() != 3:
        raise ValueError(f"{fn}: d must be 3-D (groups, m, n); got {gemm._shape(d)}")
    num_groups, m, n = d.shape
    if len(ks) != num_groups:
        raise ValueError(f"{fn}: ks_cpu names {len(ks)} groups but d has {num_groups} "
                         f"(d is (groups, m, n) = {gemm._shape(d)})")
    total_k = sum(ks)
    for name, data, rows in (("a[0]", a_data, m), ("b[0]", b_data, n)):
        if data.dim() != 1 or data.numel() != total_k * rows:
            raise ValueError(f"{fn}: {name} must be 1-D with sum(ks_cpu) * {'m' if rows == m else 'n'} "
                             f"= {total_k} * {rows} = {total_k * rows} elements (each group's "
                             f"[{'m' if rows == m else 'n'}, K_g] K-major block, back to back); "
                             f"got shape {gemm._shape(data)}")
    gemm._check_shape(fn, "a[1] (scales)", a_scales, (m, total_k // _BLOCK),
                      "(m, sum(ks) / 128)")
    gemm._check_shape(fn, "b[1] (scales)", b_scales, (n, total_k // _BLOCK),
                      "(n, sum(ks) / 128)")
    gemm._check_shape(fn, "grouped_layout", grouped_layout, (num_groups,), "(groups,)")
    _check_c_d(fn, c, d, (num_groups, m, n), "(groups, m, n)", real)
    gemm._check_contiguous(fn, "a[0]", a_data, real)
    gemm._check_contiguous(fn, "b[0]", b_data, real)
    gemm._check_contiguous(fn, "grouped_layout", grouped_layout, real)
    gemm._check_devices(fn, (("a[0]", a_data), ("a[1]", a_scales), ("b[0]", b_data),
                             ("b[1]", b_scales), ("c", c), ("d", d),
                             ("grouped_layout", grouped_layout)))
    return a_data, a_scales, b_data, b_scales, ks, real


def k_grouped_fp8_gemm_nt_contiguous(a: Tuple[torch.Tensor, torch.Tensor],
                                     b: Tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                                     ks_cpu: Sequence[int], grouped_layout: torch.Tensor,
                                     c: Optional[torch.Tensor] = None,
                                     recipe=WGRAD_RECIPE) -> torch.Tensor:
    """MoE expert weight gradients: for each group g, d[g] = c[g] + A_g . B_g^T in fp32.

    Requirements (DeepGEMM's layout): group g's A_g (fp8 [m, K_g]) and B_g (fp8 [n, K_g]) are
    K-major and stored back to back in `a[0]` / `b[0]` (1-D, sum(K_g) * m and sum(K_g) * n
    elements); K_g (`ks_cpu`, host ints) are multiples of 128, zero allowed (then d[g] = c[g]).
    Scales are one fp32 per row and 128 K of each group, the groups' K blocks side by side:
    `a[1]` [m, sum(K_g) / 128], `b[1]` [n, sum(K_g) / 128], row-major or MN-major (converted
    to MN-major with a copy unless already so). `grouped_layout`: the same K_g as an int32
    tensor on the GPU (checked for shape, never read on the host). `c` fp32 [G, m, n] is
    required; `d` may be `c`.

    Returns:
        `d`. (The operators: `torch.ops.dgemm.k_grouped_fp8_wgrad[_accumulate]`.)
    """
    a_data, a_scales, b_data, b_scales, ks, direct = checked_k_grouped(
        a, b, d, ks_cpu, grouped_layout, c, recipe)
    if direct:
        _run_k_grouped(a_data, a_scales, b_data, b_scales, c, d, ks)
    elif c is d:
        ops.K_GROUPED_WGRAD_ACCUMULATE(a_data, a_scales, b_data, b_scales, d, ks,
                                       grouped_layout)
    else:
        ops.K_GROUPED_WGRAD(a_data, a_scales, b_data, b_scales, c, d, ks, grouped_layout)
    return d


def _run_k_grouped(a, sa, b, sb, c, d, ks: list) -> None:
    num_groups, m, n = d.shape
    if m == 0 or n == 0:
        return
    busy = [k for k in ks if k]
    if not busy:
        if c is not d:
            d.copy_(c)
        return
    family, spec, kernel = _kernel_for("k_grouped_fp8_gemm_nt_contiguous", m, n,
                                       max(busy), num_groups, d.device)
    family.launch_k_grouped(spec, a, utils.get_mn_major_tma_aligned_tensor(sa), b,
                            utils.get_mn_major_tma_aligned_tensor(sb), c, d, ks, kernel)


def k_grouped_fp8_wgrad_op(a, sa, b, sb, c, d, ks, grouped_layout) -> None:
    a, sa, b, sb, ks, _ = checked_k_grouped((a, sa), (b, sb), d, ks, grouped_layout, c,
                                            WGRAD_RECIPE, real=True)
    _run_k_grouped(a, sa, b, sb, c, d, ks)


def k_grouped_fp8_wgrad_accumulate_op(a, sa, b, sb, d, ks, grouped_layout) -> None:
    a, sa, b, sb, ks, _ = checked_k_grouped((a, sa), (b, sb), d, ks, grouped_layout, d,
                                            WGRAD_RECIPE, real=True)
    _run_k_grouped(a, sa, b, sb, d, d, ks)
