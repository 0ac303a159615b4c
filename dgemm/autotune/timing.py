"""The GPU timer of the autotuner: time candidate kernels of one shape class on synthetic inputs
of the class's representative size.

    time_candidates(specs, cls, device_index, repeats=20) -> [seconds per spec]

Every candidate is loaded first (compiled through the cache walk if needed: the tune job and
the first call of a class pay for it, and the kernels land in every tier), launched once to
warm up, then timed `repeats` times in interleaved rounds (candidate 1, 2, ..., 1, 2, ...) so a
clock change touches them all alike. Each timed launch follows a write of twice the L2 size,
so no candidate reads operands another left in L2, and is bracketed by CUDA events on the
current stream. Each round starts with a spin kernel long enough for the host to enqueue the
whole round behind it: otherwise the GPU would wait for each launch (tens of microseconds of
Python) between the start event and the kernel, and small kernels would be timed as host
overhead. After the spin comes one untimed launch, and each round starts at the next candidate
(round r at candidate r mod their count): the first kernel after the spin ran 5..9 us slower
than the same kernel later in the round (bench/NOTES.md, session 16 w10), which with a fixed
order always hit the heuristic's pick, timed first, and made decisions lose to it by up to 12%.
One synchronize at the end reads every event; a candidate's time is the mean of the
middle half of its rounds (events resolve about half a microsecond, a few percent of a small
kernel: averaging many rounds resolves finer than a median can), for the masked layout summed
over its row-count draws (`classes.MASKED_DRAWS`). A
candidate that cannot be loaded (compile error, a kernel missing under DGEMM_DISABLE_JIT) gets
`inf`.

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


def time_candidates(specs: list, cls: ShapeClass, device_index=None, repeats: int = 20) -> list:
    """Median seconds of each spec on the class's representative problem (inf: not runnable)."""
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
        events = {item: [] for item in items}
        for round_index in range(repeats):
            torch.cuda._sleep(_SPIN_CYCLES_PER_LAUNCH * (len(items) + 1))
            first = round_index % len(items)
            order = items[first:] + items[:first]
            flush.zero_()
            launch(order[0])            # untimed: takes the slow start after the spin
            for item in order:
                flush.zero_()
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                launch(item)
                end.record()
                events[item].append((start, end))
        torch.cuda.synchronize(device)
    seconds = [0.0 if loaded[i] is not None else math.inf for i in range(len(specs))]
    for (i, _), pairs in events.items():
        seconds[i] += _middle_mean([s.elapsed_time(e) / 1e3 for s, e in pairs])
    return seconds


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
