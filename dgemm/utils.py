"""Helpers around the GEMMs: FP8 casts with DeepSeek's scaling recipe, scale layouts, SM count.

Everything here works on CPU tensors too (the casts and layouts are plain torch), except
`get_num_sms()` without a prior `set_num_sms()`, which asks the current CUDA device.
"""
from __future__ import annotations

from typing import Tuple

import torch

from .jit import state

FP8_E4M3_MAX = 448.0     # largest finite float8_e4m3fn
SCALE_BLOCK = 128        # one scale per 128 elements along K (and per 128 rows of B)
_AMAX_FLOOR = 1e-4       # keeps the scale of an all-zero block finite

_num_sms = state.Value("utils.num_sms")              # set_num_sms's value, or None
_device_sms = state.table("utils.device_sms")       # device index -> SM count


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def align(x: int, alignment: int) -> int:
    return ceil_div(x, alignment) * alignment


# --- SM count used by the heuristics -----------------------------------------------------------
def set_num_sms(num_sms: int) -> None:
    """Limit the SMs the persistent kernels plan for (e.g. to leave SMs to communication)."""
    if not isinstance(num_sms, int) or isinstance(num_sms, bool) or num_sms <= 0:
        raise ValueError(f"set_num_sms: num_sms must be a positive int; got {num_sms!r}")
    if torch.cuda.is_available():
        available = torch.cuda.get_device_properties(
            torch.cuda.current_device()).multi_processor_count
        if num_sms > available:
            raise ValueError(f"set_num_sms: num_sms={num_sms} exceeds the {available} SMs of "
                             f"the current device; pass a value in 1..{available}")
    _num_sms.set(num_sms)


def get_num_sms() -> int:
    """The SM count set by `set_num_sms`, else the current device's SM count."""
    if _num_sms.get() is not None:
        return _num_sms.get()
    if not torch.cuda.is_available():
        raise RuntimeError("get_num_sms: no CUDA device is visible; call dgemm.set_num_sms(n) "
                           "to plan for a GPU with n SMs")
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def get_num_sms_for(device_index: int) -> int:
    """`set_num_sms`'s value, else the SM count of device `device_index` (cached)."""
    forced = _num_sms.get()
    if forced is not None:
        return forced
    count = _device_sms.get(device_index)
    if count is None:
        count = torch.cuda.get_device_properties(device_index).multi_processor_count
        _device_sms[device_index] = count
    return count


def arch_for_capability(major: int, minor: int) -> str:
    """The target dgemm compiles for on a GPU of compute capability major.minor: "sm_90a" on
    Hopper (wgmma and TMA multicast exist only in the arch-specific target), else
    "sm_<major><minor>"."""
    return "sm_90a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"


# --- FP8 casts ---------------------------------------------------------------------------------
def _check_2d_k_multiple(name: str, x: torch.Tensor) -> Tuple[int, int]:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: x must be a torch.Tensor; got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name}: x must be 2-D (m, k); got shape {tuple(x.shape)}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"{name}: x must be bfloat16, float16 or float32; got {x.dtype}")
    return x.shape[0], x.shape[1]


def per_token_cast_to_fp8(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Quantise activations with one scale per (row, 128 columns).

    Arguments:
        x: bf16/fp16/fp32 `[m, k]` with `k % 128 == 0`.
    Returns:
        `(x_fp8 [m, k] float8_e4m3fn, scales [m, k / 128] float32)` with
        `x ~= x_fp8 * scales` blockwise; scales are row-major (pass them straight to the GEMMs).
    """
    m, k = _check_2d_k_multiple("per_token_cast_to_fp8", x)
    if k % SCALE_BLOCK != 0:
        raise ValueError(f"per_token_cast_to_fp8: k must be a multiple of {SCALE_BLOCK}; got "
                         f"shape {tuple(x.shape)}. Pad k with zeros first.")
    blocks = x.float().view(m, k // SCALE_BLOCK, SCALE_BLOCK)
    amax = blocks.abs().amax(dim=2, keepdim=True).clamp(min=_AMAX_FLOOR)
    x_fp8 = (blocks * (FP8_E4M3_MAX / amax)).to(torch.float8_e4m3fn).view(m, k)
    return x_fp8, (amax / FP8_E4M3_MAX).view(m, k // SCALE_BLOCK)


def per_block_cast_to_fp8(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Quantise weights with one scale per 128x128 block.

    Arguments:
        x: bf16/fp16/fp32 `[n, k]`, any n and k (padded internally to multiples of 128).
    Returns:
        `(x_fp8 [n, k] float8_e4m3fn, scales [ceil(n / 128), ceil(k / 128)] float32)`.
    """
    n, k = _check_2d_k_multiple("per_block_cast_to_fp8", x)
    # Zero padding by F.pad (no in-place copy): also traces on fake CUDA tensors of a CPU host.
    padded = torch.nn.functional.pad(x.float(), (0, align(k, SCALE_BLOCK) - k,
                                                 0, align(n, SCALE_BLOCK) - n))
    blocks = padded.view(padded.shape[0] // SCALE_BLOCK, SCALE_BLOCK,
                         padded.shape[1] // SCALE_BLOCK, SCALE_BLOCK)
    amax = blocks.abs().amax(dim=(1, 3), keepdim=True).clamp(min=_AMAX_FLOOR)
    x_fp8 = (blocks * (FP8_E4M3_MAX / amax)).to(torch.float8_e4m3fn).view_as(padded)
    return x_fp8[:n, :k].contiguous(), (amax / FP8_E4M3_MAX).view(blocks.shape[0],
                                                                     blocks.shape[2])


# --- scale layout ------------------------------------------------------------------------------
def get_tma_aligned_size(m: int, element_size: int) -> int:
    """Rows padded so each column of an MN-major tensor starts 16-byte aligned (TMA rule)."""
    return align(m, 16 // element_size)


def is_mn_major_tma_aligned(x: torch.Tensor) -> bool:
    """True when `x` ([m, s] or [g, m, s]) already has the layout the kernels read."""
    # On every call with pre-transformed scales, hence unrolled (no generator): strides of
    # size-1 dimensions do not matter.
    shape, stride = x.shape, x.stride()
    if len(shape) == 2:
        m, s = shape
        return (m == 1 or stride[0] == 1) and (
            s == 1 or stride[1] == get_tma_aligned_size(m, x.element_size()))
    if len(shape) == 3:
        g, m, s = shape
        aligned_m = get_tma_aligned_size(m, x.element_size())
        return ((g == 1 or stride[0] == s * aligned_m) and (m == 1 or stride[1] == 1)
                and (s == 1 or stride[2] == aligned_m))
    return False


def mn_major_tma_aligned_layout(x: torch.Tensor) -> tuple:
    """(shape, strides) of `x` ([m, s] or [g, m, s]) in the MN-major, TMA-aligned layout:
    strides `(1, align(m, 4))` or `(s * align(m, 4), 1, align(m, 4))` for fp32."""
    aligned_m = get_tma_aligned_size(x.shape[-2], x.element_size())
    if x.dim() == 2:
        return tuple(x.shape), (1, aligned_m)
    g, m, s = x.shape
    return (g, m, s), (s * aligned_m, 1, aligned_m)


def get_mn_major_tma_aligned_tensor(x: torch.Tensor) -> torch.Tensor:
    """Return `x` ([m, s] or [g, m, s]) in MN-major layout with m padded to a 16-byte multiple.

    The logical shape is unchanged; the strides become `(1, align(m, 4))` (2-D) or
    `(s * align(m, 4), 1, align(m, 4))` (3-D) for fp32. No copy when `x` is already laid out so.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"get_mn_major_tma_aligned_tensor: x must be a torch.Tensor; got "
                        f"{type(x).__name__}")
    if x.dim() not in (2, 3):
        raise ValueError(f"get_mn_major_tma_aligned_tensor: x must be 2-D (m, k/128) or 3-D "
                         f"(groups, m, k/128); got shape {tuple(x.shape)}")
    if is_mn_major_tma_aligned(x):
        return x
    # One allocation and one copy kernel: the strided empty is already the target layout.
    shape, strides = mn_major_tma_aligned_layout(x)
    return torch.empty_strided(shape, strides, dtype=x.dtype, device=x.device).copy_(x)


# --- accuracy metric ---------------------------------------------------------------------------
def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """1 - 2*sum(x*y) / sum(x^2 + y^2) in float64: 0 for equal tensors; the bar is < 1e-3."""
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    if denominator == 0:
        return 0.0
    return float(1 - 2 * (x * y).sum() / denominator)
