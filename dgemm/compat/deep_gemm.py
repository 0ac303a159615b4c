"""DeepGEMM 54e2261's Hopper API (v2.6.1), served by dgemm: a drop-in for `import deep_gemm`.

The names, positional order, keywords and defaults are DeepGEMM's (recorded from its source in
tests/data/deep_gemm_54e2261_api.json and checked by tests/test_compat.py); the work is done by
dgemm's GEMMs and cache. Run a program unchanged with `python -m dgemm.compat COMMAND ...`,
which makes `import deep_gemm` load this module in COMMAND and every Python process it starts.

The training entry points are DeepGEMM's too: `fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))`
(or `recipe_a=(1, 128), recipe_b=(1, 128)`) is the weight-gradient GEMM, fp32 `d = c + a . b^T`
with `d` allowed to be `c` (`dgemm.wgrad`), and `k_grouped_fp8_gemm_nt_contiguous` is the MoE
experts' one (`dgemm.k_grouped_fp8_gemm_nt_contiguous`; A and B may come in any contiguous
shape holding sum(ks) * m and sum(ks) * n elements, as DeepGEMM reads only their element count).

What dgemm does not do on Hopper raises NotImplementedError naming the option, never a silent
different answer: packed UE8M0 scales (int32 scale tensors, `use_packed_ue8m0`), FP4 operands,
MN-major (transposed) operands, `c` or an FP32 `d` with the forward recipe (DeepGEMM's Hopper
kernel for it writes bf16 and takes no `c` either), scaling recipes other than DeepSeek's
(1, 128, 128) (`recipe_a=(1, 128)` with `recipe_b=(128, 128)` is the same) and the
weight-gradient (1, 1, 128), scale granularities other than 128, `use_psum_layout`,
contiguous-layout alignments that are not multiples of 128, and `disable_ue8m0_cast=False` on a
GPU newer than Hopper (where DeepGEMM would round the scales to powers of two; on Hopper it
keeps FP32 scales either way, as dgemm does). Differences that change no result:
`compiled_dims` is accepted and ignored (dgemm compiles N into the kernel, and K too for the
forward GEMM, never M); `ensure_zero_padding` only matters to DeepGEMM's sm_100 kernels;
`set_pdl` is recorded and reported by `get_pdl`, but dgemm launches without programmatic
dependent launch. The contiguous layout also accepts its older keyword `m_indices` for
`grouped_layout`.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch._subclasses.fake_tensor import FakeTensor

from .. import gemm, utils, wgrad
from ..jit import state

_FP8 = torch.float8_e4m3fn
_FP4_DTYPES = tuple(dtype for dtype in (torch.int8, torch.uint8,
                                        getattr(torch, "float4_e2m1fn_x2", None)) if dtype)
_RECIPE = (1, 128, 128)                  # one A scale per (row, 128 of K); B per 128x128 block
_RECIPE_A, _RECIPE_B = (1, 128), (128, 128)
_WGRAD = (1, 1, 128)                     # weight gradients: both operands scaled per row and 128 K
_GRAN = 128

_mk_alignment = state.Value("compat.mk_alignment", gemm.get_mk_alignment_for_contiguous_layout())
_pdl = state.Value("compat.pdl", False)
_arch_majors = state.table("compat.arch_majors")     # device index -> compute capability major


# --- the GEMMs ------------------------------------------------------------------------------------
def fp8_gemm_nt(a: Tuple[torch.Tensor, torch.Tensor], b: Tuple[torch.Tensor, torch.Tensor],
                d: torch.Tensor, c: Optional[torch.Tensor] = None,
                recipe: Optional[Tuple[int, int, int]] = None,
                recipe_a: Optional[Tuple[int, int]] = None,
                recipe_b: Optional[Tuple[int, int]] = None, compiled_dims: str = "nk",
                disable_ue8m0_cast: bool = False) -> None:
    """D = A @ B^T written into `d`: with the forward recipe (None, (1, 128, 128)) bf16 `d`
    (`dgemm.fp8_gemm_nt`); with recipe (1, 1, 128) the weight gradient, fp32 `d = c + A @ B^T`
    with `c` required and `d` allowed to be `c` (`dgemm.wgrad`)."""
    fn = "fp8_gemm_nt"
    weight_gradient = _check_options(fn, a, b, d, recipe, recipe_a, recipe_b, compiled_dims,
                                     disable_ue8m0_cast)
    if weight_gradient:
        gemm.fp8_gemm_nt(a, b, d, c=c, recipe=_WGRAD)
        return
    if c is not None:
        raise NotImplementedError(f"{fn}: c (accumulating D = C + A @ B^T) with the forward "
                                  f"recipe {_RECIPE} is not supported by dgemm (nor by "
                                  f"DeepGEMM's Hopper kernel, which writes bf16 d); accumulation "
                                  f"is the weight-gradient GEMM: pass recipe={_WGRAD} with "
                                  f"per-row scales on both operands and an FP32 d")
    gemm.fp8_gemm_nt(a, b, d)


def m_grouped_fp8_gemm_nt_contiguous(a: Tuple[torch.Tensor, torch.Tensor],
                                     b: Tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                                     grouped_layout: Optional[torch.Tensor] = None,
                                     recipe: Optional[Tuple[int, int, int]] = None,
                                     recipe_a: Optional[Tuple[int, int]] = None,
                                     recipe_b: Optional[Tuple[int, int]] = None,
                                     compiled_dims: str = "nk", disable_ue8m0_cast: bool = False,
                                     use_psum_layout: bool = False,
                                     ensure_zero_padding: bool = True,
                                     expected_m_for_psum_layout: Optional[int] = None, *,
                                     m_indices: Optional[torch.Tensor] = None) -> None:
    """Grouped GEMM over rows stacked by group (`dgemm.m_grouped_fp8_gemm_nt_contiguous`);
    `grouped_layout` (or its older name `m_indices`) is int32 [m_sum], -1 for padding rows."""
    fn = "m_grouped_fp8_gemm_nt_contiguous"
    if grouped_layout is not None and m_indices is not None:
        raise TypeError(f"{fn}: got both grouped_layout and m_indices (the same argument under "
                        f"its old name); pass one")
    layout = grouped_layout if grouped_layout is not None else m_indices
    if layout is None:
        raise TypeError(f"{fn}: missing the fourth argument, grouped_layout (int32 [m_sum], "
                        f"each row's group, -1 for padding)")
    if use_psum_layout:
        raise NotImplementedError(f"{fn}: use_psum_layout=True (groups given as prefix sums "
                                  f"of rows) is not supported by dgemm; pass the per-row "
                                  f"layout (int32 [m_sum], -1 for padding rows)")
    if expected_m_for_psum_layout is not None:
        raise ValueError(f"{fn}: expected_m_for_psum_layout applies only with "
                         f"use_psum_layout=True; got {expected_m_for_psum_layout!r}")
    _check_forward_options(fn, a, b, d, recipe, recipe_a, recipe_b, compiled_dims,
                           disable_ue8m0_cast)
    if _mk_alignment.get() != _GRAN and isinstance(d, torch.Tensor) and d.dim() == 2 \
            and d.shape[0] % _mk_alignment.get() != 0:
        raise ValueError(f"{fn}: m_sum={d.shape[0]} is not a multiple of the alignment "
                         f"{_mk_alignment.get()} set with set_mk_alignment_for_contiguous_layout")
    gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)


def m_grouped_fp8_gemm_nt_masked(a: Tuple[torch.Tensor, torch.Tensor],
                                 b: Tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                                 masked_m: torch.Tensor, expected_m: int,
                                 recipe: Optional[Tuple[int, int, int]] = None,
                                 recipe_a: Optional[Tuple[int, int]] = None,
                                 recipe_b: Optional[Tuple[int, int]] = None,
                                 compiled_dims: str = "nk",
                                 disable_ue8m0_cast: bool = False) -> None:
    """Masked batched GEMM (`dgemm.m_grouped_fp8_gemm_nt_masked`)."""
    _check_forward_options("m_grouped_fp8_gemm_nt_masked", a, b, d, recipe, recipe_a,
                           recipe_b, compiled_dims, disable_ue8m0_cast)
    gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)


fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked     # DeepGEMM's older name


def k_grouped_fp8_gemm_nt_contiguous(a: Tuple[torch.Tensor, torch.Tensor],
                                     b: Tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                                     ks_cpu: Optional[List[int]], grouped_layout: torch.Tensor,
                                     c: Optional[torch.Tensor] = None,
                                     recipe: Tuple[int, int, int] = _WGRAD,
                                     compiled_dims: str = "mn",
                                     use_psum_layout: bool = False) -> None:
    """MoE expert weight gradients (`dgemm.k_grouped_fp8_gemm_nt_contiguous`): for each group
    g, fp32 d[g] = c[g] + A_g @ B_g^T, A_g [m, K_g] and B_g [n, K_g] K-major and back to back;
    `ks_cpu` the host list of K_g, `grouped_layout` the same as int32 on the GPU."""
    fn = "k_grouped_fp8_gemm_nt_contiguous"
    if use_psum_layout:
        raise NotImplementedError(f"{fn}: use_psum_layout=True (groups given as prefix sums of "
                                  f"K) is not supported by dgemm (nor by DeepGEMM's Hopper "
                                  f"kernel); pass ks_cpu, each group's K, with grouped_layout "
                                  f"the same values as int32 on the GPU")
    if _recipe_tuple(fn, "recipe", recipe, 3) != _WGRAD:
        raise NotImplementedError(f"{fn}: recipe={tuple(recipe)} is not supported by dgemm; "
                                  f"it runs recipe={_WGRAD} only (one FP32 scale per row and "
                                  f"128 K on both operands)")
    _check_compiled_dims(fn, compiled_dims)
    _check_operands(fn, a, b)
    gemm_a, gemm_b = _flat_pair(a), _flat_pair(b)
    wgrad.k_grouped_fp8_gemm_nt_contiguous(gemm_a, gemm_b, d, ks_cpu, grouped_layout, c=c,
                                           recipe=_WGRAD)


def _flat_pair(pair):
    """DeepGEMM reads only the element count of a k-grouped operand: a contiguous tensor of
    any shape is viewed as the 1-D array dgemm takes (anything else goes to dgemm's checks)."""
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        return pair
    data, scales = pair
    if isinstance(data, torch.Tensor) and data.dim() != 1 and data.is_contiguous():
        data = data.view(-1)
    return data, scales


def _check_options(fn: str, a, b, d, recipe, recipe_a, recipe_b, compiled_dims,
                   disable_ue8m0_cast) -> bool:
    """NotImplementedError for what dgemm cannot honour; the tensors' own checks (dtypes,
    shapes, devices) are dgemm's, after this. True for the weight-gradient recipe."""
    weight_gradient = _check_recipe(fn, recipe, recipe_a, recipe_b)
    _check_compiled_dims(fn, compiled_dims)
    if not isinstance(disable_ue8m0_cast, bool):
        raise TypeError(f"{fn}: disable_ue8m0_cast must be a bool; got {disable_ue8m0_cast!r}")
    _check_operands(fn, a, b)
    if not weight_gradient and isinstance(d, torch.Tensor) and d.dtype == torch.float32:
        raise NotImplementedError(f"{fn}: an FP32 output d with the forward recipe {_RECIPE} is "
                                  f"not supported by dgemm; pass a bfloat16 d (FP32 d is the "
                                  f"weight-gradient GEMM: recipe={_WGRAD} with c)")
    if not disable_ue8m0_cast:
        _refuse_ue8m0_cast(fn, a)
    return weight_gradient


def _check_forward_options(fn: str, *options) -> None:
    """`_check_options` for the m-grouped GEMMs, which have no weight-gradient form."""
    if _check_options(fn, *options):
        raise NotImplementedError(f"{fn}: the weight-gradient recipe {_WGRAD} is not supported "
                                  f"by dgemm's m-grouped GEMMs (nor by DeepGEMM's on Hopper); "
                                  f"MoE weight gradients are k_grouped_fp8_gemm_nt_contiguous")


def _check_compiled_dims(fn: str, compiled_dims) -> None:
    if not isinstance(compiled_dims, str):
        raise TypeError(f"{fn}: compiled_dims must be a str such as 'nk'; got "
                        f"{type(compiled_dims).__name__}")


def _check_operands(fn: str, a, b) -> None:
    """FP4 operands, MN-major ones and packed UE8M0 scales: NotImplementedError."""
    for name, pair in (("a", a), ("b", b)):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            continue                    # dgemm's checks explain what a pair must be
        data, scales = pair
        if isinstance(data, torch.Tensor):
            if data.dtype in _FP4_DTYPES:
                raise NotImplementedError(f"{fn}: FP4 operands ({name}[0] is {data.dtype}) "
                                          f"are not supported by dgemm on Hopper; quantize "
                                          f"{name} to float8_e4m3fn")
            if data.dim() >= 2 and data.stride(-1) != 1 and data.stride(-2) == 1 \
                    and data.shape[-1] > 1:
                raise NotImplementedError(f"{fn}: MN-major {name}[0] (strides {data.stride()}: "
                                          f"K is not the contiguous dimension) is not "
                                          f"supported by dgemm; pass a K-major tensor "
                                          f"(.contiguous())")
        if isinstance(scales, torch.Tensor) and scales.dtype == torch.int32:
            raise NotImplementedError(f"{fn}: packed UE8M0 scales ({name}[1] is int32) are not "
                                      f"supported by dgemm on Hopper; pass float32 scales")


def _recipe_tuple(fn: str, name: str, value, length: int) -> tuple:
    if (not isinstance(value, (tuple, list)) or len(value) != length
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise TypeError(f"{fn}: {name} must be a tuple of {length} ints; got {value!r}")
    return tuple(value)


def _check_recipe(fn: str, recipe, recipe_a, recipe_b) -> bool:
    """Whether the recipe is the weight-gradient one; NotImplementedError for recipes dgemm
    does not run."""
    if recipe is not None and (recipe_a is not None or recipe_b is not None):
        raise ValueError(f"{fn}: pass either recipe or the pair recipe_a and recipe_b, not both")
    if (recipe_a is None) != (recipe_b is None):
        raise ValueError(f"{fn}: recipe_a and recipe_b go together; got recipe_a={recipe_a!r}, "
                         f"recipe_b={recipe_b!r}")
    if recipe is not None:
        recipe = _recipe_tuple(fn, "recipe", recipe, 3)
        if recipe not in (_RECIPE, _WGRAD):
            raise NotImplementedError(f"{fn}: recipe={recipe} is not supported by dgemm; it "
                                      f"runs DeepSeek's recipe {_RECIPE} (A scaled per row and "
                                      f"128 columns, B per 128x128 block) and the "
                                      f"weight-gradient recipe {_WGRAD} (both per row and 128 "
                                      f"columns) only")
        return recipe == _WGRAD
    if recipe_a is None:
        return False                    # DeepGEMM's default on Hopper: (1, 128, 128)
    pair = (_recipe_tuple(fn, "recipe_a", recipe_a, 2), _recipe_tuple(fn, "recipe_b", recipe_b, 2))
    if pair not in ((_RECIPE_A, _RECIPE_B), (_RECIPE_A, _RECIPE_A)):
        raise NotImplementedError(f"{fn}: recipe_a={pair[0]}, recipe_b={pair[1]} is not "
                                  f"supported by dgemm; it runs recipe_a={_RECIPE_A} with "
                                  f"recipe_b={_RECIPE_B} (forward) or recipe_b={_RECIPE_A} "
                                  f"(weight gradient) only")
    return pair[1] == _RECIPE_A


def _refuse_ue8m0_cast(fn: str, a) -> None:
    """DeepGEMM keeps FP32 scales on Hopper whatever disable_ue8m0_cast says, but on newer GPUs
    it rounds them to powers of two unless disabled: refuse there rather than differ."""
    data = a[0] if isinstance(a, (tuple, list)) and a else None
    if not (isinstance(data, torch.Tensor) and data.device.type == "cuda"
            and not torch.compiler.is_compiling() and not isinstance(data, FakeTensor)):
        return                          # fake or traced tensors: no device to ask
    index = data.device.index
    major = _arch_majors.get(index)
    if major is None:
        major = _arch_majors[index] = torch.cuda.get_device_capability(index)[0]
    if major > 9:
        raise NotImplementedError(f"{fn}: disable_ue8m0_cast=False on an sm_{major}x GPU, "
                                  f"where DeepGEMM rounds the scales to UE8M0 (powers of two), "
                                  f"is not supported by dgemm, which uses FP32 scales as "
                                  f"given; pass disable_ue8m0_cast=True")


# --- runtime settings -----------------------------------------------------------------------------
def get_num_sms() -> int:
    return utils.get_num_sms()


def set_num_sms(new_num_sms: int, /) -> None:
    utils.set_num_sms(new_num_sms)


def set_pdl(new_enable_pdl: bool, /) -> None:
    """Recorded for `get_pdl`; dgemm launches without programmatic dependent launch (results
    are the same either way)."""
    _pdl.set(bool(new_enable_pdl))


def get_pdl() -> bool:
    return _pdl.get()


def get_mk_alignment_for_contiguous_layout() -> int:
    return _mk_alignment.get()


def set_mk_alignment_for_contiguous_layout(new_value: int, /) -> None:
    if not isinstance(new_value, int) or isinstance(new_value, bool) or new_value <= 0:
        raise ValueError(f"set_mk_alignment_for_contiguous_layout: expected a positive int; "
                         f"got {new_value!r}")
    if new_value % _GRAN != 0:
        raise NotImplementedError(f"set_mk_alignment_for_contiguous_layout({new_value}): dgemm's "
                                  f"contiguous layout needs each group's rows padded to a "
                                  f"multiple of {_GRAN}")
    _mk_alignment.set(new_value)


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m: Optional[int] = None) -> int:
    """128 on Hopper, whatever `expected_m` (DeepGEMM shrinks it on sm_100 only)."""
    return _GRAN


get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout


# --- layouts --------------------------------------------------------------------------------------
def get_tma_aligned_size(x: int, element_size: int, /) -> int:
    return utils.get_tma_aligned_size(x, element_size)


def get_mn_major_tma_aligned_tensor(sf: torch.Tensor, /) -> torch.Tensor:
    return utils.get_mn_major_tma_aligned_tensor(sf)


def transform_sf_into_required_layout(sf: torch.Tensor, mn: int, k: int, recipe,
                                      num_groups: Optional[int] = None,
                                      is_sfa: Optional[bool] = None,
                                      disable_ue8m0_cast: bool = False,
                                      psum_layout: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Scales in the layout the Hopper GEMMs read: per-row ones (granularity (1, 128)) become
    MN-major and TMA-aligned; per-block ones ((128, 128)) are returned as they are."""
    fn = "transform_sf_into_required_layout"
    recipe = tuple(recipe)
    if len(recipe) == 3:
        if is_sfa is None:
            raise ValueError(f"{fn}: a three-value recipe needs is_sfa (which operand's scales)")
        gran = (recipe[0] if is_sfa else recipe[1], recipe[2])
    elif len(recipe) == 2:
        if is_sfa is not None:
            raise ValueError(f"{fn}: a two-value recipe (granularity MN, K) takes no is_sfa")
        gran = recipe
    else:
        raise ValueError(f"{fn}: recipe must have two or three values; got {recipe}")
    if psum_layout is not None:
        raise NotImplementedError(f"{fn}: psum_layout is not supported by dgemm")
    if sf.dtype == torch.int32:
        raise NotImplementedError(f"{fn}: packed UE8M0 scales (int32) are not supported by "
                                  f"dgemm on Hopper; pass float32 scales")
    if sf.dtype != torch.float32 or gran not in (_RECIPE_A, _RECIPE_B):
        raise NotImplementedError(f"{fn}: {sf.dtype} scales of granularity {gran} are not "
                                  f"supported by dgemm; it reads float32 scales of granularity "
                                  f"{_RECIPE_A} (A) and {_RECIPE_B} (B)")
    expected = (utils.ceil_div(mn, gran[0]), utils.ceil_div(k, gran[1]))
    if num_groups is not None:
        expected = (num_groups,) + expected
    if tuple(sf.shape) != expected:
        raise ValueError(f"{fn}: sf must have shape {expected} for mn={mn}, k={k}, granularity "
                         f"{gran}" + (f", {num_groups} groups" if num_groups else "")
                         + f"; got {tuple(sf.shape)}")
    return utils.get_mn_major_tma_aligned_tensor(sf) if gran == _RECIPE_A else sf


# --- math and casts -------------------------------------------------------------------------------
def ceil_div(x: int, y: int) -> int:
    return utils.ceil_div(x, y)


def align(x: int, y: int) -> int:
    return utils.align(x, y)


def per_token_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128,
                          use_packed_ue8m0: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """FP8 rows with one float32 scale per (row, 128 columns); any column count (padded
    inside). `use_ue8m0` rounds each scale up to a power of two."""
    _check_cast("per_token_cast_to_fp8", x, gran_k)
    if use_packed_ue8m0:
        raise NotImplementedError("per_token_cast_to_fp8: use_packed_ue8m0=True (int32 packed "
                                  "scales) is not supported by dgemm on Hopper")
    m, n = x.shape
    padded = torch.zeros((m, utils.align(n, _GRAN)), dtype=torch.float32, device=x.device)
    padded[:, :n] = x.float()
    blocks = padded.view(m, -1, _GRAN)
    scales = _scales(blocks.abs().amax(dim=2), use_ue8m0)
    x_fp8 = (blocks / scales.unsqueeze(2)).to(_FP8).view(m, -1)[:, :n].contiguous()
    return x_fp8, scales


def per_block_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool,
                          gran_k: int = 128) -> Tuple[torch.Tensor, torch.Tensor]:
    """FP8 with one float32 scale per 128x128 block; any shape (padded inside). `use_ue8m0`
    rounds each scale up to a power of two."""
    _check_cast("per_block_cast_to_fp8", x, gran_k)
    m, n = x.shape
    padded = torch.zeros((utils.align(m, _GRAN), utils.align(n, _GRAN)), dtype=torch.float32,
                         device=x.device)
    padded[:m, :n] = x.float()
    blocks = padded.view(padded.shape[0] // _GRAN, _GRAN, padded.shape[1] // _GRAN, _GRAN)
    scales = _scales(blocks.abs().amax(dim=(1, 3)), use_ue8m0)
    x_fp8 = (blocks / scales[:, None, :, None]).to(_FP8).view_as(padded)[:m, :n].contiguous()
    return x_fp8, scales


def _check_cast(fn: str, x, gran_k) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"{fn}: x must be a 2-D tensor; got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if gran_k != _GRAN:
        raise NotImplementedError(f"{fn}: gran_k={gran_k} is not supported by dgemm, whose "
                                  f"kernels read one scale per {_GRAN} values of K")


def _scales(amax: torch.Tensor, use_ue8m0: bool) -> torch.Tensor:
    scales = amax.clamp(min=1e-4) / utils.FP8_E4M3_MAX
    return torch.exp2(torch.ceil(torch.log2(scales))) if use_ue8m0 else scales


__all__ = ["fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
           "fp8_m_grouped_gemm_nt_masked", "k_grouped_fp8_gemm_nt_contiguous", "get_num_sms", "set_num_sms", "set_pdl", "get_pdl",
           "get_mk_alignment_for_contiguous_layout", "set_mk_alignment_for_contiguous_layout",
           "get_theoretical_mk_alignment_for_contiguous_layout",
           "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
           "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor",
           "transform_sf_into_required_layout", "ceil_div", "align", "per_token_cast_to_fp8",
           "per_block_cast_to_fp8"]
