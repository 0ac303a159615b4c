"""Shared pieces of the GPU tests and benches: random FP8 inputs with their float32 reference,
grouped-layout builders, poison checks, timing and table rows (STYLE.md item 14).

The reference is always the unquantised inputs multiplied in float32, as BENCH.md measures;
DeepSeek's recipe lands at calc_diff ~7e-4 against it and the bar is < 1e-3.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import time
from typing import Callable, List, Optional

import torch

import dgemm

POISON = float("nan")
DIFF_BAR = 1e-3
SHAPES = json.loads((pathlib.Path(__file__).resolve().parents[2] / "dgemm" / "shapes" /
                     "deepseek_v3.json").read_text())
DENSE_SHAPES = [(m, n, k) for m in SHAPES["dense"]["m"] for n, k in SHAPES["dense"]["nk"]]


# --- inputs ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class DenseCase:
    a: tuple                  # (fp8 [m, k], fp32 [m, k/128])
    b: tuple                  # (fp8 [n, k], fp32 [ceil(n/128), k/128])
    ref: torch.Tensor         # float32 [m, n] of the unquantised inputs


def random_dense(m: int, n: int, k: int, device: str = "cuda") -> DenseCase:
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=device, dtype=torch.bfloat16)
    return DenseCase(dgemm.per_token_cast_to_fp8(x), dgemm.per_block_cast_to_fp8(w),
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


# --- checks ---------------------------------------------------------------------------------------
def poisoned(*shape, device: str = "cuda") -> torch.Tensor:
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


# --- timing and tables ----------------------------------------------------------------------------
def kernel_us(fn: Callable[[], object], iterations: int = 10) -> float:
    """Mean device time of `fn` in microseconds (CUDA events, after one warm-up call).

    A spin kernel queued first keeps the GPU busy while the host enqueues the calls, so host
    overhead does not leak into the measurement (no L2 flush: use bench/ for BENCH.md figures).
    """
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(20_000_000)      # ~10 ms at 2 GHz: longer than enqueuing the calls
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iterations


def host_us_per_call(fn: Callable[[], object], calls: int = 200) -> float:
    """Wall time of `calls` back-to-back calls / calls (host overhead where it exceeds the
    kernel time), as BENCH.md's per-call column."""
    fn()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - started
    torch.cuda.synchronize()
    return elapsed * 1e6 / calls


def print_heading(title: str, columns: str = "     m      n      k      us   TFLOPS     diff") -> None:
    print(f"\n{title:<18}{columns}")


def print_row(m: int, n: int, k: int, us: float, diff: float, flop_m: Optional[int] = None) -> None:
    """One aligned row; `flop_m` counts only valid rows when it differs from m."""
    tflops = 2 * (flop_m if flop_m is not None else m) * n * k / us / 1e6 if us > 0 else 0.0
    print(f"{'':<18}{m:>6} {n:>6} {k:>6} {us:>7.1f} {tflops:>8.0f} {diff:>8.1e}")


# --- tile configs ---------------------------------------------------------------------------------
@contextlib.contextmanager
def forced_tile(block_m: int, block_n: int, multicast: int = 1, on_a: bool = True):
    """Within the block, every sm_90a GEMM call runs a (block_m x block_n) tile at the
    heuristic's pipeline depth for it (clusters of `multicast` CTAs sharing A, or B when
    `on_a` is False), whatever the heuristic would pick."""
    select = dgemm.heuristics.select

    def forced(kind, m, n, k, num_groups=1, num_sms=132, arch="sm_90a"):
        spec = select(kind, m, n, k, num_groups, num_sms, arch)
        if spec.kernel != "fp8_gemm":
            return spec
        stages = dgemm.heuristics.hopper_num_stages(block_m, block_n, k)
        return dataclasses.replace(spec, block_m=block_m, block_n=block_n, num_stages=stages,
                                   num_tma_multicast=multicast,
                                   multicast_on_a=multicast > 1 and on_a)

    dgemm.heuristics.select = forced
    try:
        yield
    finally:
        dgemm.heuristics.select = select
