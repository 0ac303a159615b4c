"""Measuring helpers shared by the GPU benchmarks (the rules: docs/benchmarks.md).

Kernel time: CUDA kernel time from torch.profiler, L2 flushed with a 256 MB memset before each
call, mean over the timed calls. Per-call time: wall time of back-to-back calls from Python.
"""
from __future__ import annotations

import math
import pathlib
import time

import torch

from dgemm.autotune.timing import kernel_record_us

FLUSH_BYTES = 256 << 20
_FLUSH_KERNEL_HINTS = ("fill", "memset", "Fill")


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
        total += kernel_record_us(event)
    return total / iters


# Rounds take the functions in turn from a different first one (`interleaved_samples`); False
# keeps one fixed order (the order before session 13, for comparisons: `--fixed-order`).
ROTATE_ORDER = True


def interleaved_samples(fns: dict, rounds: int = 5, iters: int = 20) -> dict:
    """kernel_time_us of each function in each of `rounds` alternating rounds: {name: [us per
    round]}. The GPU's clock drifts with power and heat over a run (seen: the same kernel
    10..15% apart minutes later), so implementations measured back to back in one block each
    would be compared at different clocks. It also sags within a round: the GPU idles while a
    round's profiler session starts and its SM clock falls from ~1.98 to ~1.3..1.4 GHz under
    load (bench/NOTES.md q4), so round r starts at function r (mod their count) instead of
    always at the first. A round is one profiler session over all the functions
    (`round_times`), which saves a session per function and round; where its kernels cannot be
    told apart it falls back to one session per function."""
    samples = {name: [] for name in fns}
    names = list(fns)
    for index in range(rounds):
        first = index % len(names) if ROTATE_ORDER else 0
        order = {name: fns[name] for name in names[first:] + names[:first]}
        times = round_times(order, iters)
        if times is None:
            times = {name: kernel_time_us(fn, iters=iters) for name, fn in order.items()}
        for name in fns:
            samples[name].append(times[name])
    return samples


_MARKER_KERNEL = "spin_kernel"        # torch.cuda._sleep's kernel: launched by nothing else


def round_times(fns: dict, iters: int = 20, warmup: int = 3):
    """{name: mean CUDA-kernel us of one call} for every function, all timed in one profiler
    session: each function's `iters` L2-flushed calls, then a marker kernel (torch.cuda._sleep)
    that closes its segment of the kernel timeline. None when the timeline does not split into
    one non-empty segment per function (the caller then times them one by one)."""
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for fn in fns.values():
            for _ in range(iters):
                flush.zero_()
                fn()
            torch.cuda._sleep(1)
        torch.cuda.synchronize()
    kernels = [(e.time_range.start, e.name, kernel_record_us(e)) for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA]
    totals = split_at_markers(kernels, len(fns))
    return None if totals is None else {name: t / iters for name, t in zip(fns, totals)}


def split_at_markers(kernels: list, count: int):
    """Kernel time of each of `count` segments of a timeline of (start, name, us) kernels, each
    closed by a marker kernel; flush kernels are left out. None unless there are exactly
    `count` markers and no segment is empty."""
    totals, current = [0.0], 0
    for _, name, us in sorted(kernels, key=lambda kernel: kernel[0]):
        if _MARKER_KERNEL in name:
            totals.append(0.0)
            current += 1
        elif not any(hint in name for hint in _FLUSH_KERNEL_HINTS):
            totals[current] += us
    totals = totals[:-1]                  # nothing follows the last marker
    return totals if current == count and all(totals) else None


def check_round_times(fns: dict, iters: int = 20) -> str:
    """One line comparing `round_times` with one profiler session per function on the same
    functions (printed once per run, so a table says that its way of timing agrees)."""
    together = round_times(fns, iters)
    apart = {name: kernel_time_us(fn, iters=iters) for name, fn in fns.items()}
    if together is None:
        return "timing check: one session per round could not split the kernels; timed apart"
    return "timing check (us, one session per round / one per function): " + ", ".join(
        f"{name} {together[name]:.1f}/{apart[name]:.1f}" for name in fns)


class CudaFault(RuntimeError):
    """A CUDA error in a timed or checked function: the process's CUDA context is lost, so a
    benchmark records the shape and exits (`--resume` goes on in a fresh process)."""


def is_cuda_fault(exc: BaseException) -> bool:
    return "CUDA error" in str(exc) or type(exc).__name__ == "AcceleratorError"


def checked(name: str, fn):
    """fn(), synchronised, with a CUDA fault raised as CudaFault naming `name`."""
    try:
        result = fn()
        torch.cuda.synchronize()
        return result
    except Exception as exc:
        if is_cuda_fault(exc):
            raise CudaFault(f"{name}: {str(exc).splitlines()[0]}") from exc
        raise


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


def add_run_arguments(parser, unit: str) -> None:
    """The options that control a bench run, shared by bench_gemm and bench_grouped: configs
    to skip, compile only, the --json file and --resume after a CUDA fault, --autotune
    (`unit`: what one row of the bench times, "shape" or "case")."""
    parser.add_argument("--fixed-order", action="store_true",
                        help="time the functions of every round in one fixed order (dgemm's "
                             "pick first), as before session 13; default: each round starts at "
                             "the next function")
    parser.add_argument("--skip-configs", default="",
                        help="comma-separated configs (e.g. 64x192x6/mc1) never timed beside "
                             "the heuristic's pick")
    parser.add_argument("--precompile-only", action="store_true",
                        help="compile every kernel the run would time, then stop")
    parser.add_argument("--json", type=pathlib.Path,
                        help="write the rows here (rewritten after every shape)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows (and faulted shapes) already in --json and time "
                             "only the others; after a CUDA fault the run records the shape, "
                             "exits with 3 and can be resumed this way")
    parser.add_argument("--autotune", action="store_true",
                        help=f"run dgemm with DGEMM_AUTOTUNE=1: tune each {unit}'s class first "
                             "(or reuse its published decision), time the heuristic's pick "
                             "beside it")
