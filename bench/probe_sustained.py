"""Each config of one contiguous MoE shape timed on its own with CUDA events (no profiler):
back-to-back calls, then calls each after an L2 flush; per config the median and the first /
last fifth, so a config whose clock sags over a sustained run (power) shows it. A probe for
bench/NOTES.md (q4): `bench_grouped` times through torch.profiler in interleaved rounds.

    python -m bench.probe_sustained --groups 4 --rows 8192 --n 4096 --k 7168 \
        --config 128x256 --config 128x256/mc2b --calls 40
"""
from __future__ import annotations

import argparse

import torch

from bench.inputs import contiguous_case
from bench.compare_tiles import parse_tile
from bench.profile_gemm import contiguous_call
from bench.timing import FLUSH_BYTES, median


def _timed(fn, calls: int, flush) -> list:
    """Milliseconds of each of `calls` calls (events around each; `flush` before each if set)."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(calls)]
    for start, end in events:
        if flush is not None:
            flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--k", type=int, default=7168)
    parser.add_argument("--config", action="append", default=[],
                        help="BLOCK_MxBLOCK_N[/mc2a|/mc2b] (repeatable); 'deep_gemm' for DeepGEMM")
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args(argv)
    case, a, b, layout, d = contiguous_case(args.rows, args.n, args.k, args.groups)
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    flops = 2 * int(case.valid.sum()) * args.n * args.k
    fns = {config: contiguous_call("deep_gemm", None, a, b, d, layout) if config == "deep_gemm"
           else contiguous_call("dgemm", parse_tile(config), a, b, d, layout)
           for config in args.config}
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    fifth = max(1, args.calls // 5)
    for mode, buffer in (("back-to-back", None), ("flushed", flush)):
        for name, fn in fns.items():
            ms = _timed(fn, args.calls, buffer)
            print(f"{mode:<13} {name:<14} median {median(ms) * 1e3:8.1f} us "
                  f"({flops / median(ms) / 1e9:6.0f} TFLOPS)  first {median(ms[:fifth]) * 1e3:8.1f}"
                  f"  last {median(ms[-fifth:]) * 1e3:8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
