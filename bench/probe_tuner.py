"""The autotuner's timer against the benchmarks' timer, on the same candidates and inputs:

    python -m bench.probe_tuner --shape M,N,K [--shape ...] [--repeats 3]

For the dense class of each shape it prints the cost model's DGEMM_AUTOTUNE_TOP_K candidates'
times from `dgemm.autotune.timing.time_candidates` with either clock (`--repeats` separate
calls each, as a tune would make one) and from `bench.timing.interleaved_samples` (profiler
kernel times, L2 flushed, rotating rounds) on the tuner's own representative problem,
back-to-back bursts timed with CUDA events (no flush between launches), and the first two
candidates timed alone (the same kernel every launch) and alternating (each launch after the
other kernel). A timer that orders the candidates differently from the other explains a
decision that loses to the heuristic in a benchmark (bench/NOTES.md, session 16 w8-w14).
"""
from __future__ import annotations

import argparse
from statistics import fmean

import torch

import dgemm
from bench import timing
from dgemm import kernels
from dgemm.autotune import classes, timing as tuner_timing
from dgemm.autotune.tuner import tile_name
from dgemm.jit import env
from dgemm.kernels import hopper_fp8, loader


def probe(m: int, n: int, k: int, repeats: int) -> None:
    cls = classes.shape_class("fp8_gemm_nt", m, n, k, 1, dgemm.get_num_sms(), hopper_fp8.ARCHS[0])
    specs = classes.candidates(cls, env.autotune_top_k())
    names = [tile_name(spec) for spec in specs]
    print(f"\n{cls.describe()} (timed at M={classes.representative_m(cls)}): "
          f"{', '.join(names)}; the first is the heuristic's", flush=True)
    for r in range(repeats):
        for clock, profiler in (("events", False), ("profiler", True)):
            seconds = tuner_timing.time_candidates(specs, cls, profiler=profiler)
            print(f"  tuner {clock:8} #{r}: " + "  ".join(
                f"{name} {s * 1e6:7.2f}" for name, s in zip(names, seconds)), flush=True)
    (operands,) = tuner_timing._problems(cls, torch.device("cuda"))
    loaded = [loader.get_kernel(spec, None) for spec in specs]

    def call(spec, kernel):
        return lambda: kernels.family(spec.kernel).launch(spec, *operands, kernel)
    fns = {name: call(spec, kernel) for name, spec, kernel in zip(names, specs, loaded)}
    samples = timing.interleaved_samples(fns, rounds=max(3, len(fns)), iters=10)
    print("  bench    : " + "  ".join(f"{name} {timing.median(us):7.2f}"
                                      for name, us in samples.items()), flush=True)
    print("  burst    : " + "  ".join(f"{name} {_burst_us(fn):7.2f}" for name, fn in fns.items()),
          flush=True)
    # The first two candidates, each after an L2 flush: alone (the same kernel every launch)
    # and alternating (each launch follows the other kernel): what the profiler gives each.
    first, second = list(fns.items())[:2]
    alone = [_profiled_us([first[1]] * 20), _profiled_us([second[1]] * 20)]
    mixed = _profiled_us([first[1], second[1]] * 10)
    print(f"  alone    : {first[0]} {fmean(alone[0]):7.2f}  {second[0]} {fmean(alone[1]):7.2f}",
          flush=True)
    print(f"  alternate: {first[0]} {fmean(mixed[0::2]):7.2f}  {second[0]} "
          f"{fmean(mixed[1::2]):7.2f}", flush=True)


def _profiled_us(calls: list) -> list:
    """Profiler kernel time of each call of `calls` (one kernel each), L2 flushed before each."""
    flush = torch.empty(timing.FLUSH_BYTES, dtype=torch.int8, device="cuda")
    calls[0]()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for call in calls:
            flush.zero_()
            call()
        torch.cuda.synchronize()
    records = tuner_timing.gemm_kernel_records(prof.events(), torch.cuda.current_device())
    if len(records) != len(calls):
        raise RuntimeError(f"{len(records)} GEMM kernel records for {len(calls)} calls")
    return [us for _, us in records]


def _burst_us(fn, launches: int = 20) -> float:
    """CUDA-event time of `launches` back-to-back calls (no flush between them) per call,
    behind a spin that covers the host's enqueueing: per-launch costs outside the kernel
    (what the tuner's events see and the profiler's kernel times do not) amortised."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(tuner_timing._SPIN_CYCLES_PER_LAUNCH * launches)
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / launches


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", required=True, help="M,N,K (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for text in args.shape:
        m, n, k = (int(x) for x in text.split(","))
        probe(m, n, k, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
