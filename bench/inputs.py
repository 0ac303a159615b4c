"""Random FP8 inputs with their float32 reference, and the checks made on outputs: the one way
the GPU tests (tests/gpu/) and the benchmarks (bench/) build problems, so a figure in a table
and a passing test are about the same inputs.

The reference is always the unquantised inputs multiplied in float32, as docs/benchmarks.md
measures; DeepSeek's recipe lands at calc_diff ~7e-4 against it and the bar is < 1e-3.
Importing this module does no CUDA work; the builders allocate on `device` when called.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import List, Optional

import torch

import dgemm

POISON = float("nan")
DIFF_BAR = 1e-3
SHAPES_FILE = pathlib.Path(dgemm.__file__).resolve().parent / "shapes" / "deepseek_v3.json"


# --- shapes ---------------------------------------------------------------------------------------
def load_shapes(path: pathlib.Path = SHAPES_FILE) -> dict:
    """A shape manifest (dense, grouped_contiguous, grouped_masked), by default DeepSeek-V3's."""
    return json.loads(pathlib.Path(path).read_text())


def dense_shapes(manifest: dict) -> list:
    """(m, n, k) of every dense problem of a manifest: each m with each (n, k) pair."""
    return [(m, n, k) for m in manifest["dense"]["m"] for n, k in manifest["dense"]["nk"]]


# --- inputs ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class DenseCase:
    x: torch.Tensor           # bf16 [m, k]: the unquantised activations (bf16 baselines)
    w: torch.Tensor           # bf16 [n, k]: the unquantised weights
    a: tuple                  # (fp8 [m, k], fp32 [m, k/128])
    b: tuple                  # (fp8 [n, k], fp32 [ceil(n/128), k/128])
    ref: torch.Tensor         # float32 [m, n] of the unquantised inputs


def random_dense(m: int, n: int, k: int, device: str = "cuda") -> DenseCase:
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=device, dtype=torch.bfloat16)
    return DenseCase(x, w, dgemm.per_token_cast_to_fp8(x), dgemm.per_block_cast_to_fp8(w),
                     x.float() @ w.float().t())


def random_grouped_b(groups: int, n: int, k: int, device: str = "cuda"):
    """(b pair [G, n, k] / [G, ceil(n/128), k/128], unquantised weights [G, n, k] float32)."""
    w = torch.randn(groups, n, k, device=device, dtype=torch.bfloat16)
    data = torch.empty(groups, n, k, device=device, dtype=torch.float8_e4m3fn)
    scales = torch.empty(groups, dgemm.ceil_div(n, 128), k // 128, device=device)
    for g in range(groups):
        data[g], scales[g] = dgemm.per_block_cast_to_fp8(w[g])
    return (data, scales), w.float()


@dataclasses.dataclass
class ContiguousCase:
    a: tuple                  # (fp8 [m_sum, k], fp32 [m_sum, k/128])
    b: tuple
    m_indices: torch.Tensor   # int32 [m_sum], -1 on padding rows
    ref: torch.Tensor         # float32 [m_sum, n]; padding rows are 0
    valid: torch.Tensor       # bool [m_sum]
    group_rows: List[int]


def random_contiguous(group_rows: List[int], n: int, k: int,
                      device: str = "cuda") -> ContiguousCase:
    """Rows of group g: `group_rows[g]`, each group padded to 128 rows with m_indices = -1."""
    alignment = dgemm.get_mk_alignment_for_contiguous_layout()
    padded = [dgemm.ceil_div(r, alignment) * alignment for r in group_rows]
    m_sum = max(sum(padded), alignment)
    m_indices = torch.full((m_sum,), -1, dtype=torch.int32)
    start = 0
    for g, (rows, size) in enumerate(zip(group_rows, padded)):
        m_indices[start:start + rows] = g
        start += size
    m_indices = m_indices.to(device)
    b, w = random_grouped_b(len(group_rows), n, k, device)
    x = torch.randn(m_sum, k, device=device, dtype=torch.bfloat16)
    valid = m_indices >= 0
    ref = torch.zeros(m_sum, n, device=device)
    for g in range(len(group_rows)):
        rows = m_indices == g
        ref[rows] = x[rows].float() @ w[g].t()
    return ContiguousCase(dgemm.per_token_cast_to_fp8(x), b, m_indices, ref, valid,
                          list(group_rows))


def contiguous_case(m: int, n: int, k: int, groups: int, device: str = "cuda"):
    """`groups` contiguous groups of m rows each, for timing: (case, A with MN-major scales, B,
    m_indices, a bf16 d)."""
    case = random_contiguous([m] * groups, n, k, device)
    d = torch.empty(case.m_indices.numel(), n, device=device, dtype=torch.bfloat16)
    return case, mn_major(case.a), case.b, case.m_indices, d


@dataclasses.dataclass
class MaskedCase:
    a: tuple                  # (fp8 [G, max_m, k], fp32 [G, max_m, k/128])
    b: tuple
    masked_m: torch.Tensor    # int32 [G]
    ref: torch.Tensor         # float32 [G, max_m, n]
    valid: torch.Tensor       # bool [G, max_m]


def random_masked(masked_rows: List[int], max_m: int, n: int, k: int,
                  device: str = "cuda") -> MaskedCase:
    groups = len(masked_rows)
    x = torch.randn(groups, max_m, k, device=device, dtype=torch.bfloat16)
    data = torch.empty(groups, max_m, k, device=device, dtype=torch.float8_e4m3fn)
    scales = torch.empty(groups, max_m, k // 128, device=device)
    for g in range(groups):
        data[g], scales[g] = dgemm.per_token_cast_to_fp8(x[g])
    b, w = random_grouped_b(groups, n, k, device)
    ref = torch.einsum("gmk,gnk->gmn", x.float(), w)
    masked_m = torch.tensor(masked_rows, dtype=torch.int32, device=device)
    valid = torch.arange(max_m, device=device)[None, :] < masked_m[:, None]
    return MaskedCase((data, scales), b, masked_m, ref, valid)


def mn_major(pair: tuple) -> tuple:
    """An (fp8, scales) A pair with its scales already in the kernel's MN-major, TMA-aligned
    layout, as a training step keeps them; otherwise each timed call would also transpose the
    scales."""
    return pair[0], dgemm.get_mn_major_tma_aligned_tensor(pair[1])


# --- checks ---------------------------------------------------------------------------------------
def poisoned(*shape, device: str = "cuda") -> torch.Tensor:
    """A bf16 output filled with NaN, so an element the kernel never wrote stays visible."""
    return torch.full(shape, POISON, dtype=torch.bfloat16, device=device)


def unwritten_count(d: torch.Tensor, must_write: Optional[torch.Tensor] = None) -> int:
    """Elements still NaN among those that had to be written (rows where `must_write`)."""
    nan = d.isnan()
    return int((nan if must_write is None else nan[must_write]).sum())


def overwritten_count(d: torch.Tensor, must_not_write: torch.Tensor) -> int:
    """Elements no longer NaN among rows that must stay untouched."""
    return int((~d.isnan()[must_not_write]).sum())


def calc_diff_rows(d: torch.Tensor, ref: torch.Tensor, rows: torch.Tensor) -> float:
    """calc_diff over the rows selected by the boolean `rows` (0 when none are selected)."""
    if not bool(rows.any()):
        return 0.0
    return dgemm.calc_diff(d[rows], ref[rows])
