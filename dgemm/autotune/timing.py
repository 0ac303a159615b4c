"""The GPU timer of the autotuner: time candidate kernels of one shape class on synthetic inputs
of the class's representative size.

    time_candidates(specs, cls, device_index, repeats=20) -> [seconds per spec]
    time_candidates_by_problem(...) -> [[seconds per representative problem] per spec]

Every candidate is loaded first (compiled through the cache walk if needed: the tune job and
the first call of a class pay for it, and the kernels land in every tier), launched once to
warm up, then timed in interleaved rounds (candidate 1, 2, ..., 1, 2, ...) so a clock change
touches them all alike; round r starts at candidate r (mod their count), so no candidate is
always first. Each timed launch follows a write of twice the L2 size, so no candidate reads
operands another left in L2. A candidate's time is the mean of the middle half of its rounds,
for the masked layout summed over its row-count draws (`classes.MASKED_DRAWS`). A candidate
that cannot be loaded (compile error, a kernel missing under DGEMM_DISABLE_JIT) gets `inf`.

Two clocks:
- `profiler=True` (a tuning step of its own: `tune_class`, so `dgemm-cache tune` and the
  benchmarks' --autotune): each kernel's own duration from the profiler's kernel records
  (CUPTI), as the benchmarks take it (bench/timing.py): a round gives each candidate a burst
  of one untimed and BURST timed launches (`repeats` // BURST rounds), as the benchmarks and
  DeepGEMM's own time a kernel in back-to-back calls. NOTES: timed one launch each, after
  another candidate, the widest-code tiles paid 1.5..6 us the benchmarks never see: at
  384x4096x8192 that timer chose 192x64 over 128x96, which then ran 6% faster than it in the
  benchmark's rounds (bench/NOTES.md session 16 w14, session 27 g1).
- otherwise (a class first met inside a running job, or where the profiler cannot run: a build
  without it, the caller's own session active): CUDA events around each launch, behind a spin
  kernel long enough for the host to enqueue the whole round (else the GPU would wait for each
  launch between the start event and the kernel), the round's first launch untimed. A job's
  process never starts a profiler of ours (CUPTI left attached could slow its later launches).
  Event times hold more than the kernel: tiles near the shared-memory limit pay 3..9 us between
  the flush and the kernel that the profiler leaves out, and before the untimed launch the
  heuristic's pick, first after the spin, ran 5..9 us slow; decisions made so lost to the
  heuristic by up to 12% in the benchmarks (bench/NOTES.md, session 16 w8-w14).

Inputs are random FP8 with positive scales from a fixed seed, in the layouts the launchers take
(docs/architecture.md, "Launch contract"). Allocating them may fail on a busy GPU: the caller
(the tuner) then goes without a decision.
"""
from __future__ import annotations

import math
import statistics

import torch

from .. import kernels, utils
from ..jit.logs import logger
from ..kernels import loader
from . import classes
from .classes import ShapeClass

_SEED = 20261123
_DEFAULT_L2_BYTES = 50 << 20        # H100/H200: 50 MiB, when the device does not say
# Spin per launch queued behind it: ~100 us at 1.98 GHz covers the host's flush, two event
# records and one launch through Python.
_SPIN_CYCLES_PER_LAUNCH = 200_000
# Every kernel the tuner times is a Hopper GEMM (dgemm::fp8_gemm_kernel<...>); the flushes are
# memsets.
_GEMM_KERNEL = "fp8_gemm_kernel"


def time_candidates(specs: list, cls: ShapeClass, device_index=None, repeats: int = 20, *,
                    profiler: bool = False) -> list:
    """Seconds of each spec on the class's representative problems, summed (inf: not
    runnable); `profiler`: the kernels' own durations from the profiler's records."""
    return [sum(per_problem) for per_problem in time_candidates_by_problem(
        specs, cls, device_index, repeats, profiler=profiler)]


def time_candidates_by_problem(specs: list, cls: ShapeClass, device_index=None,
                               repeats: int = 20, *, profiler: bool = False) -> list:
    """Per spec, its seconds on each of the class's representative problems (one, or the
    masked layout's MASKED_DRAWS; all inf: not runnable)."""
    if device_index is None:
        device_index = torch.cuda.current_device()
    device = torch.device("cuda", device_index)
    loaded = []
    for spec in specs:
        try:
            loaded.append(loader.get_kernel(spec, device_index))
        except Exception as error:       # CompileError, MissingKernelError, a load failure
            logger.warning("dgemm.autotune: cannot load candidate %dx%d for %s (%s: %s)",
                           spec.block_m, spec.block_n, cls.describe(), type(error).__name__,
                           error)
            loaded.append(None)
    with torch.cuda.device(device):
        problems = _problems(cls, device)
        flush = torch.empty(_l2_bytes(device_index) * 2 // 4, dtype=torch.int32, device=device)
        items = [(i, p) for i, kernel in enumerate(loaded) if kernel is not None
                 for p in range(len(problems))]

        def launch(item):
            spec, operands = specs[item[0]], problems[item[1]]
            kernels.family(spec.kernel).launch(spec, *operands, loaded[item[0]])

        for item in items:
            launch(item)                # warm-up: first-touch costs stay out of the figures
        torch.cuda.synchronize(device)
        samples = (_profiled(items, launch, flush, max(1, repeats // BURST), device)
                   if profiler and items else None)
        if samples is None:
            samples = _event_timed(items, launch, flush, repeats, device)
    seconds = [[0.0 if loaded[i] is not None else math.inf] * len(problems)
               for i in range(len(specs))]
    for (i, p), times in samples.items():
        seconds[i][p] = _middle_mean(times)
    return seconds


# Timed launches per candidate and round of the profiled timer (after one untimed launch).
BURST = 4


def _rounds(items: list, repeats: int):
    """Each round's order: round r starts at item r (mod their count), so no candidate is
    always first (or last) after the flush."""
    for round_index in range(repeats):
        first = round_index % len(items)
        yield items[first:] + items[:first]


def _profiled(items: list, launch, flush, rounds: int, device) -> dict:
    """{item: [kernel seconds per round]} from the profiler's kernel records (CUPTI), as the
    benchmarks time (bench/timing.py): each launch after an L2 flush, the kernel's own
    duration; in each round an item's burst of 1 + BURST launches, the first untimed, gives
    the mean of the others. None when the profiler cannot run here (not built in, another
    session active) or its records do not line up with the launches."""
    if _profiler_running():
        return None                     # the caller's own session: leave it alone
    order = [item for round_order in _rounds(items, rounds) for item in round_order
             for _ in range(1 + BURST)]
    try:
        from torch.profiler import ProfilerActivity, profile
        session = profile(activities=[ProfilerActivity.CUDA])
        session.__enter__()
    except Exception as error:          # no Kineto, a profiler that cannot start, ...
        logger.info("dgemm.autotune: profiler timing unavailable (%s: %s); timing with "
                    "CUDA events", type(error).__name__, error)
        return None
    try:                                # a launch's own error reaches the caller
        for item in order:
            flush.zero_()
            launch(item)
        torch.cuda.synchronize(device)
    finally:
        session.__exit__(None, None, None)
    try:
        records = gemm_kernel_records(session.events(), device.index)
    except Exception as error:
        logger.info("dgemm.autotune: unreadable profiler records (%s: %s); timing with CUDA "
                    "events", type(error).__name__, error)
        return None
    if len(records) != len(order) or not all(us > 0 for _, us in records):
        logger.info("dgemm.autotune: %d kernel records for %d launches; timing with CUDA "
                    "events", len(records), len(order))
        return None
    samples = {item: [] for item in items}
    for burst in range(0, len(order), 1 + BURST):
        timed = records[burst + 1:burst + 1 + BURST]      # the burst's first launch untimed
        samples[order[burst]].append(sum(us for _, us in timed) / len(timed) / 1e6)
    return samples


def gemm_kernel_records(events, device_index) -> list:
    """(start, us) of the GEMM kernels among a profiler session's `events` on one device, in
    start order (flushes and other kernels left out)."""
    return sorted((event.time_range.start, kernel_record_us(event)) for event in events
                  if event.device_type == torch.autograd.DeviceType.CUDA
                  and getattr(event, "device_index", device_index) == device_index
                  and _GEMM_KERNEL in event.name)


def _profiler_running() -> bool:
    """Whether a profiling session (the caller's) is active in this process: torch refuses a
    second one (with a warning in the caller's output), so the events time instead."""
    enabled = getattr(torch._C._autograd, "_profiler_enabled", None)
    return bool(enabled()) if enabled is not None else True


def kernel_record_us(event) -> float:
    """A profiler kernel record's duration in microseconds (torch names it device_time, older
    releases cuda_time)."""
    for name in ("device_time", "cuda_time"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def _event_timed(items: list, launch, flush, repeats: int, device) -> dict:
    """{item: [seconds per round]} between CUDA events around each launch, behind a spin that
    covers the host's enqueueing, the first launch after the spin untimed (it ran 5..9 us
    slow). These times also hold what happens between the flush and the kernel: 3..9 us more
    than the kernel's own duration, the most for tiles near the shared-memory limit
    (bench/NOTES.md, session 16 w10-w12), so the profiler's are preferred."""
    events = {item: [] for item in items}
    for order in _rounds(items, repeats):
        torch.cuda._sleep(_SPIN_CYCLES_PER_LAUNCH * (len(items) + 1))
        flush.zero_()
        launch(order[0])
        for item in order:
            flush.zero_()
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            launch(item)
            end.record()
            events[item].append((start, end))
    torch.cuda.synchronize(device)
    return {item: [start.elapsed_time(end) / 1e3 for start, end in pairs]
            for item, pairs in events.items()}


def _middle_mean(samples: list) -> float:
    """The mean of the middle half of `samples` (robust to a few disturbed rounds)."""
    ordered = sorted(samples)
    quarter = len(ordered) // 4
    return statistics.fmean(ordered[quarter:len(ordered) - quarter])


def _l2_bytes(device_index: int) -> int:
    size = getattr(torch.cuda.get_device_properties(device_index), "L2_cache_size", 0)
    return size if size and size > 0 else _DEFAULT_L2_BYTES


def _problems(cls: ShapeClass, device: torch.device) -> list:
    """[(a, sa, b, sb, d, layout)] of the class's representative problem(s), as `launch`
    takes them: one, or for the masked layout one per row count (sharing their tensors)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(_SEED)
    n, k, groups = cls.n, cls.k, cls.num_groups

    def fp8(*shape):
        return torch.randn(*shape, device=device, generator=generator).to(torch.float8_e4m3fn)

    def scales(*shape):
        return torch.rand(*shape, device=device, generator=generator) + 0.5

    k_blocks = k // 128
    if cls.kind == "m_grouped_fp8_gemm_nt_masked":
        max_m = classes.masked_max_m(cls)
        a = fp8(groups, max_m, k)
        sa = utils.get_mn_major_tma_aligned_tensor(scales(groups, max_m, k_blocks))
        b, sb = fp8(groups, n, k), scales(groups, utils.ceil_div(n, 128), k_blocks)
        d = torch.empty(groups, max_m, n, dtype=torch.bfloat16, device=device)
        return [(a, sa, b, sb, d,
                 torch.tensor(classes.masked_rows(cls, draw), dtype=torch.int32,
                              device=device))
                for draw in range(classes.MASKED_DRAWS)]
    m = classes.representative_m(cls)
    a = fp8(m, k)
    sa = utils.get_mn_major_tma_aligned_tensor(scales(m, k_blocks))
    d = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    if cls.kind == "m_grouped_fp8_gemm_nt_contiguous":
        b, sb = fp8(groups, n, k), scales(groups, utils.ceil_div(n, 128), k_blocks)
        rows = classes.contiguous_rows(cls)
        layout = torch.repeat_interleave(torch.arange(groups, dtype=torch.int32),
                                         torch.tensor(rows)).to(device)
        return [(a, sa, b, sb, d, layout)]
    b, sb = fp8(n, k), scales(utils.ceil_div(n, 128), k_blocks)
    return [(a, sa, b, sb, d, None)]
