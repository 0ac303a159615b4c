"""Shared pieces of the GPU tests: inputs and output checks (from bench/inputs.py, which the
benchmarks use too, so tests and tables build problems the same way), device timing and table
rows (docs/contributing.md, "GPU tests").

Tile configs are forced with the library's own `dgemm.heuristics.forced_tile`.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

import torch

from bench.inputs import (DIFF_BAR, POISON, ContiguousCase, DenseCase, MaskedCase,  # noqa: F401
                          calc_diff_rows, dense_shapes, load_shapes, overwritten_count, poisoned,
                          random_contiguous, random_dense, random_grouped_b, random_masked,
                          unwritten_count)

SHAPES = load_shapes()
DENSE_SHAPES = dense_shapes(SHAPES)


# --- timing and tables ----------------------------------------------------------------------------
def kernel_us(fn: Callable[[], object], iterations: int = 10) -> float:
    """Mean device time of `fn` in microseconds (CUDA events, after one warm-up call).

    A spin kernel queued first keeps the GPU busy while the host enqueues the calls, so host
    overhead does not leak into the measurement (no L2 flush: the benchmarks in bench/ measure by docs/benchmarks.md).
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
    kernel time), as the benchmarks' per-call column."""
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
