"""Measuring helpers shared by the GPU benchmarks (the rules: docs/benchmarks.md).

Kernel time: CUDA kernel time from torch.profiler, L2 flushed with a 256 MB memset before each
call, mean over the timed calls. Per-call time: wall time of back-to-back calls from Python.
"""
from __future__ import annotations

import math
import time

import torch

FLUSH_BYTES = 256 << 20
_FLUSH_KERNEL_HINTS = ("fill", "memset", "Fill")


def _kernel_us(event) -> float:
    for name in ("device_time", "cuda_time"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def kernel_time_us(fn, iters: int = 20, warmup: int = 3) -> float:
    """Mean CUDA-kernel time of one `fn()` call (all kernels it launches), L2 flushed before each."""
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    total = 0.0
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if any(h in event.name for h in _FLUSH_KERNEL_HINTS):
            continue
        total += _kernel_us(event)
    return total / iters


def interleaved_samples(fns: dict, rounds: int = 5, iters: int = 20) -> dict:
    """kernel_time_us of each function in each of `rounds` alternating rounds: {name: [us per
    round]}. The GPU's clock drifts with power and heat over a run (seen: the same kernel
    10..15% apart minutes later), so implementations measured back to back in one block each
    would be compared at different clocks."""
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(kernel_time_us(fn, iters=iters))
    return samples


def median(values) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def paired_ratios(samples: dict, name: str, baseline: str) -> list:
    """Baseline time / `name` time of each round, each pair measured seconds apart, so a round
    in which the GPU ran slow for both cancels out; report their median (and range)."""
    return [b / t for b, t in zip(samples[baseline], samples[name])]


def per_call_us(fn, iters: int = 200) -> float:
    """Wall time of `iters` back-to-back calls / iters (host overhead where it exceeds the kernel)."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


def geomean(values) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def gpu_name() -> str:
    props = torch.cuda.get_device_properties(0)
    return f"{props.name} ({props.multi_processor_count} SMs), torch {torch.__version__}"
