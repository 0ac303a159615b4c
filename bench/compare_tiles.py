"""A/B tile configs (and kernel sources) of the dense GEMM, cuBLAS-blk in the same rounds.

    python -m bench.compare_tiles --shape 4096,4096,7168 --config 128x256x3 \
        --config 128x256x3/mc2a --config 128x256x3/mc2b [--config 128x256x3@/path/csrc] \
        [--rounds 5] [--clocks] [--json out.json] [--groups G]

`--groups G`: the contiguous MoE layout instead, G groups of M rows each (no cuBLAS column).

A config is BLOCK_MxBLOCK_N[xSTAGES] (default: the heuristic's depth for that tile), optionally
/mc2a (2-CTA clusters sharing A through TMA multicast) or /mc2b (sharing B), and optionally @DIR: compile from the csrc tree DIR instead of
the packaged one (DGEMM_CSRC_DIR), to compare kernel sources in one process. `heuristic` is the
heuristic's pick. Every config and cuBLAS-blk is timed in each of `rounds` alternating rounds
(20 L2-flushed calls each, docs/benchmarks.md); the table gives the median TFLOPS per config and
the median over rounds of (config / cuBLAS-blk of the same round), which cancels clock drift
between rounds; DeepGEMM (when `import deep_gemm` works, docs/benchmarks.md) is timed in the
same rounds on the same inputs, with config / DeepGEMM per round the same way. All configs are
compiled first in parallel worker processes. --clocks also reads the SM clock and board power
while each config runs back to back for ~0.5 s (the H200 is power-capped: the clock under load
is part of the speed).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import statistics
import sys
import threading
import time

import torch

import dgemm
from dgemm.heuristics import select
from dgemm.utils import calc_diff

from .baselines import (cublas_blockwise_checked, deep_gemm_contiguous, deep_gemm_dense,
                        deep_gemm_module)
from .inputs import calc_diff_rows, contiguous_case, mn_major, random_dense
from .timing import gpu_name, interleaved_samples, median, paired_ratios

# Cluster suffix -> (num_tma_multicast, multicast_on_a, k_split): none, 2-CTA clusters sharing
# A or B through TMA multicast, or K-split pairs (two CTAs per tile, each half of K).
CLUSTERS = {"mc1": (1, False, 1), "mc2a": (2, True, 1), "mc2b": (2, False, 1),
            "ks2": (1, False, 2)}


def parse_tile(text: str) -> tuple:
    """'128x192/mc2b' -> (128, 192, 2, False, 1): forced_tile's arguments (no stages; /mc1
    when no cluster is named). argparse.ArgumentTypeError for anything else."""
    match = re.fullmatch(r"(\d+)x(\d+)(?:/(mc1|mc2a|mc2b|ks2))?", text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected BLOCK_MxBLOCK_N[/mc1|/mc2a|/mc2b|/ks2]")
    return (int(match[1]), int(match[2])) + CLUSTERS[match[3] or "mc1"]


def parse_config(text: str, base):
    """`base` (the heuristic's spec) with the tile, stages and cluster of `text`; csrc dir."""
    from dgemm.kernels import hopper_fp8

    text, _, csrc = text.partition("@")
    if text == "heuristic":
        return base, csrc or None
    tile, _, cluster = text.partition("/")
    if cluster and cluster not in CLUSTERS:
        raise SystemExit(f"compare_tiles: cluster must be mc1, mc2a, mc2b or ks2; got "
                         f"{cluster!r}")
    multicast, on_a, k_split = CLUSTERS[cluster or "mc1"]
    dims = [int(v) for v in tile.split("x")]
    spec = hopper_fp8.with_tile(base, dims[0], dims[1], num_tma_multicast=multicast,
                                multicast_on_a=on_a, k_split=k_split)
    if len(dims) > 2:                     # an explicit depth instead of the heuristic's
        spec = dataclasses.replace(spec, num_stages=dims[2])
    return spec, csrc or None


def load(spec, csrc):
    """The loaded kernel of `spec` built from the csrc tree `csrc` (default: the packaged one),
    so that two sources of one spec can be timed side by side. DGEMM_CSRC_DIR is set only while
    the kernel is fetched: the csrc digest is part of the cache key and the csrc dir part of the
    loader's memo key, so each source gets its own entry and its own kernel handle."""
    from dgemm.kernels import loader

    previous = os.environ.get("DGEMM_CSRC_DIR")
    try:
        if csrc:
            os.environ["DGEMM_CSRC_DIR"] = csrc
        else:
            os.environ.pop("DGEMM_CSRC_DIR", None)
        return loader.get_kernel(spec)
    finally:
        if previous is None:
            os.environ.pop("DGEMM_CSRC_DIR", None)
        else:
            os.environ["DGEMM_CSRC_DIR"] = previous


def clock_and_power(fn, seconds: float = 1.5):
    """Mean SM clock (MHz) and board power (W) sampled every 20 ms while `fn` runs back to
    back (no L2 flush) for `seconds`, the first third left out (clock settling)."""
    try:
        torch.cuda.clock_rate()
    except Exception:                         # pynvml missing: keep the timing table
        return float("nan"), float("nan")
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((time.perf_counter(), torch.cuda.clock_rate(),
                            torch.cuda.power_draw() / 1000))
            time.sleep(0.02)

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    thread = threading.Thread(target=sample)
    thread.start()
    while time.perf_counter() - start < seconds:
        for _ in range(8):
            fn()
        torch.cuda.synchronize()
    stop.set()
    thread.join()
    kept = [(mhz, watts) for t, mhz, watts in samples if t - start > seconds / 3]
    return (statistics.mean(v[0] for v in kept), statistics.mean(v[1] for v in kept))


def base_spec(m: int, n: int, k: int, groups: int):
    """The heuristic's spec of the dense call, or of `groups` contiguous groups of m rows."""
    if groups:
        return select("m_grouped_fp8_gemm_nt_contiguous", m * groups, n, k, groups,
                      num_sms=dgemm.get_num_sms())
    return select("fp8_gemm_nt", m, n, k, num_sms=dgemm.get_num_sms())


def prepare(m: int, n: int, k: int, configs, groups: int = 0):
    """(fns, rows, flops): one call per implementation on shared inputs (cuBLAS-blk where it
    takes the shape, DeepGEMM where it imports, then each config), each already run once and
    its calc_diff in rows[name]["diff"]."""
    from dgemm.kernels import hopper_fp8

    fns, rows = {}, {}
    deep_gemm = deep_gemm_module()
    if groups:
        case, a, b, layout, d = contiguous_case(m, n, k, groups)
        flops = 2 * int(case.valid.sum()) * n * k
        check = lambda out: calc_diff_rows(out, case.ref, case.valid)       # noqa: E731
        deep = deep_gemm_contiguous if deep_gemm is not None else None
        deep_args = (layout,)
    else:
        case = random_dense(m, n, k)
        a, b, layout = mn_major(case.a), case.b, None
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        flops = 2 * m * n * k
        check = lambda out: calc_diff(out, case.ref)                         # noqa: E731
        deep, deep_args = (deep_gemm_dense if deep_gemm is not None else None), ()
        run_cublas, _, cublas_error = cublas_blockwise_checked(a, b, m)
        if run_cublas is None:     # cuBLAS-blk refuses some shapes (e.g. M = 511 on cu130)
            print(f"{m}x{n}x{k}: cuBLAS-blk skipped: {cublas_error}")
        else:
            fns["cuBLAS-blk"] = run_cublas
    base = base_spec(m, n, k, groups)
    if deep is not None:
        d_deep = torch.full_like(d, float("nan"))
        fns["DeepGEMM"] = deep(deep_gemm, a, b, d_deep, *deep_args)
        fns["DeepGEMM"]()
        rows["DeepGEMM"] = {"diff": check(d_deep)}
    for text in configs:
        spec, csrc = parse_config(text, base)
        kernel = load(spec, csrc)
        fn = (lambda s=spec, kern=kernel:
              hopper_fp8.launch(s, a[0], a[1], b[0], b[1], d, layout, kernel=kern))
        d.fill_(float("nan"))
        fn()
        rows[text] = {"diff": check(d)}
        fns[text] = fn
    return fns, rows, flops


def compare(m: int, n: int, k: int, configs, rounds: int, clocks: bool, groups: int = 0):
    fns, rows, flops = prepare(m, n, k, configs, groups)
    samples = interleaved_samples(fns, rounds)
    out = {}
    for name, times in samples.items():
        row = rows.get(name, {"diff": float("nan")})
        rounds = (paired_ratios(samples, name, "cuBLAS-blk") if "cuBLAS-blk" in samples
                  else [float("nan")])
        row["tflops"] = flops / median(times) / 1e6
        row["us"] = median(times)
        row["ratio"], row["ratio_range"] = median(rounds), (min(rounds), max(rounds))
        if "DeepGEMM" in samples:
            row["vs_deepgemm"] = median(paired_ratios(samples, name, "DeepGEMM"))
        if clocks:
            row["mhz"], row["watts"] = clock_and_power(fns[name])
        out[name] = row
    return out


def precompile(shapes, configs, groups: int = 0) -> None:
    """Compile every (shape, config) kernel in parallel worker processes first, one batch per
    csrc tree (the workers read DGEMM_CSRC_DIR from the environment they are spawned with)."""
    from dgemm.jobs.prewarm import compile_all
    from dgemm.progress import Progress

    by_csrc = {}
    for m, n, k in shapes:
        base = base_spec(m, n, k, groups)
        for text in configs:
            spec, csrc = parse_config(text, base)
            by_csrc.setdefault(csrc, []).append(spec)
    previous = os.environ.get("DGEMM_CSRC_DIR")
    try:
        for csrc, specs in by_csrc.items():
            if csrc:
                os.environ["DGEMM_CSRC_DIR"] = csrc
            else:
                os.environ.pop("DGEMM_CSRC_DIR", None)
            specs = list(dict.fromkeys(specs))
            outcomes = compile_all(specs, os.cpu_count() or 1,
                                   Progress("precompile", len(specs), enabled=False))
            failed = [o for o in outcomes if o["status"] == "failed"]
            print(f"precompiled {len(specs)} kernels from {csrc or 'csrc/'} "
                  f"({len(failed)} failed)", flush=True)
            for outcome in failed[:3]:
                print(outcome.get("error", "")[:800], file=sys.stderr)
    finally:
        if previous is None:
            os.environ.pop("DGEMM_CSRC_DIR", None)
        else:
            os.environ["DGEMM_CSRC_DIR"] = previous


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", required=True, help="M,N,K (repeatable)")
    parser.add_argument("--config", action="append", required=True,
                        help="BMxBN[xSTAGES][/mc2a|/mc2b][@CSRC_DIR] or 'heuristic' (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clocks", action="store_true")
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--groups", type=int, default=0,
                        help="the contiguous MoE layout: G groups of M rows each")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("compare_tiles: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    precompile([tuple(int(v) for v in shape.split(",")) for shape in args.shape], args.config,
               args.groups)
    results = []
    print(f"{gpu_name()}; {args.rounds} alternating rounds")
    for shape in args.shape:
        m, n, k = (int(v) for v in shape.split(","))
        rows = compare(m, n, k, args.config, args.rounds, args.clocks, args.groups)
        results.append({"shape": [m, n, k], "rows": rows})
        print(f"\n{f'{args.groups} x ' if args.groups else ''}{m}x{n}x{k}")
        for name, r in rows.items():
            lo, hi = r["ratio_range"]
            # FLOP per SM clock: the kernel's efficiency with the power cap's clock factored out.
            extra = (f"  {r['mhz']:.0f} MHz {r['watts']:.0f} W "
                     f"{r['tflops'] * 1e6 / r['mhz'] / dgemm.get_num_sms():.0f} FLOP/clk/SM"
                     if args.clocks else "")
            deep = f"  x DeepGEMM {r['vs_deepgemm']:.3f}" if "vs_deepgemm" in r else ""
            print(f"  {name:<40} {r['tflops']:7.0f} TFLOPS {r['us']:7.1f} us  x cuBLAS "
                  f"{r['ratio']:.3f} [{lo:.3f}..{hi:.3f}]{deep}  diff {r['diff']:.1e}{extra}",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu_name(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
