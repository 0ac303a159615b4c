"""Dense FP8 GEMM benchmark: dgemm vs cuBLAS block-scaled FP8 and cuBLAS bf16, same run.

    python -m bench.bench_gemm                    # the 18 DeepSeek-V3 shapes
    python -m bench.bench_gemm --sweep            # also time every block_n for each shape
    python -m bench.bench_gemm --json out.json    # machine-readable results

Prints one row per shape (TFLOPS, kernel µs, per-call µs, calc_diff) and the geomean ratio
dgemm / cuBLAS-blk. All implementations run on the same random inputs in the same process;
their kernel times are taken in five alternating rounds of 20 L2-flushed calls (median round);
the ratio dgemm / cuBLAS-blk is the median over rounds of the ratio within each round.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import torch

import dgemm
from dgemm.utils import calc_diff

from .baselines import cublas_blockwise, deep_gemm_dense, deep_gemm_module
from .inputs import SHAPES_FILE, dense_shapes, load_shapes, mn_major, random_dense
from .timing import (geomean, gpu_name, interleaved_samples, kernel_time_us, median,
                     paired_ratios, per_call_us)


def bench_shape(m: int, n: int, k: int, sweep: bool, block_ns=None, multicasts=(1,)):
    case = random_dense(m, n, k)
    a, b, ref = mn_major(case.a), case.b, case.ref
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    flops = 2 * m * n * k
    row = {"m": m, "n": n, "k": k}

    run_dgemm = lambda: dgemm.fp8_gemm_nt(a, b, d)  # noqa: E731
    d.fill_(float("nan"))
    run_dgemm()
    row["diff"] = calc_diff(d, ref)
    timed = {"dgemm": run_dgemm, "bf16": lambda: case.x @ case.w.t()}
    try:
        run_cublas = cublas_blockwise(a, b, m)
        row["cublas_diff"] = calc_diff(run_cublas(), ref)
        timed["cublas"] = run_cublas
    except RuntimeError as error:          # keep the table even if cuBLAS refuses a shape
        row["cublas_error"] = str(error).splitlines()[0]
    deep_gemm = deep_gemm_module()
    if deep_gemm is not None:
        d_deep = torch.full_like(d, float("nan"))
        run_deep = deep_gemm_dense(deep_gemm, a, b, d_deep)
        run_deep()
        row["deepgemm_diff"] = calc_diff(d_deep, ref)
        timed["deepgemm"] = run_deep
    samples = interleaved_samples(timed)
    for name in ("dgemm", "cublas", "bf16"):
        row[f"{name}_us"] = median(samples[name]) if name in samples else float("nan")
    row["dgemm_call_us"] = per_call_us(run_dgemm)
    row["cublas_call_us"] = per_call_us(timed["cublas"]) if "cublas" in timed else float("nan")

    for name in ("dgemm", "cublas", "bf16"):
        row[f"{name}_tflops"] = flops / row[f"{name}_us"] / 1e6
    # dgemm / cuBLAS-blk: the median of the ratios of the rounds (each pair timed seconds
    # apart), with the lowest and highest round.
    if "cublas" in samples:
        rounds = paired_ratios(samples, "dgemm", "cublas")
        row["ratio"], row["ratio_min"], row["ratio_max"] = median(rounds), min(rounds), max(rounds)
    else:
        row["ratio"] = row["ratio_min"] = row["ratio_max"] = float("nan")
    if "deepgemm" in samples:
        # dgemm / DeepGEMM the same way: the median of the per-round ratios.
        rounds = paired_ratios(samples, "dgemm", "deepgemm")
        row["deepgemm_us"] = median(samples["deepgemm"])
        row["deepgemm_tflops"] = flops / row["deepgemm_us"] / 1e6
        row["deepgemm_ratio"], row["deepgemm_ratio_min"] = median(rounds), min(rounds)
    spec = dgemm.heuristics.select("fp8_gemm_nt", m, n, k, num_sms=dgemm.get_num_sms())
    cluster = "" if spec.num_tma_multicast == 1 else "ab"[not spec.multicast_on_a]
    row["config"] = f"{spec.block_m}x{spec.block_n}x{spec.num_stages}/mc{spec.num_tma_multicast}{cluster}"

    if sweep:
        row["sweep"] = sweep_block_n(spec, m, a, b, d, flops, block_ns, multicasts)
    return row


def sweep_specs(spec, m, block_ns=None, multicasts=(1,)):
    """Legal (block_m, block_n, multicast) variants of `spec` for an M-row problem, each at the
    heuristic's pipeline depth for its tile; clusters share the operand the heuristic would."""
    from dgemm.kernels import hopper_fp8

    candidates = []
    for block_m in (64, 128) if m <= 128 else (128, 192):
        legal = hopper_fp8.block_ns(block_m)
        for block_n in [n for n in block_ns or () if n in legal] or legal:
            if not hopper_fp8.num_stages(block_m, block_n, spec.k):
                continue                  # no pipeline of this tile fits shared memory
            for multicast in multicasts:
                candidates.append(hopper_fp8.with_tile(
                    spec, block_m, block_n, num_tma_multicast=multicast,
                    multicast_on_a=multicast > 1 and hopper_fp8.shares_a(block_m, block_n)))
    return candidates


def sweep_block_n(spec, m, a, b, d, flops, block_ns=None, multicasts=(1,)):
    """Time legal (block_m, block_n, multicast) configs for this shape (to tune the heuristic)."""
    from dgemm.kernels import hopper_fp8

    a_fp8, a_scales = a
    b_fp8, b_scales = b
    results = {}
    for candidate in sweep_specs(spec, m, block_ns, multicasts):
        fn = lambda: hopper_fp8.launch(candidate, a_fp8, a_scales, b_fp8, b_scales, d, None)  # noqa: E731
        name = (f"{candidate.block_m}x{candidate.block_n}x{candidate.num_stages}"
                f"/mc{candidate.num_tma_multicast}")
        results[name] = flops / kernel_time_us(fn, iters=5, warmup=1) / 1e6
    return results


def precompile(shapes, sweep: bool, block_ns, multicasts) -> None:
    """Compile every kernel the run will launch in parallel worker processes (the prewarm
    job's pool) so that a sweep of hundreds of configs is not serialised on one core."""
    from dgemm.jobs.prewarm import compile_all
    from dgemm.progress import Progress

    specs = []
    for m, n, k in shapes:
        spec = dgemm.heuristics.select("fp8_gemm_nt", m, n, k, num_sms=dgemm.get_num_sms())
        specs.append(spec)
        if sweep:
            specs += sweep_specs(spec, m, block_ns, multicasts)
    specs = list(dict.fromkeys(specs))
    outcomes = compile_all(specs, os.cpu_count() or 1, Progress("precompile", len(specs), enabled=False))
    failed = [o for o in outcomes if o["status"] == "failed"]
    print(f"precompiled {len(specs)} kernels ({len(failed)} failed)", flush=True)
    for outcome in failed[:3]:
        print(outcome.get("error", "")[:500], file=sys.stderr)


def print_table(rows, title: str):
    print(f"\n{title}")
    header = (f"{'M':>5} {'N':>6} {'K':>6} | {'dgemm':>6} {'cuBLAS':>6} {'bf16':>6} | "
              f"{'ratio [rounds]':>17} | {'kernel us dg/cb':>16} | {'call us dg/cb':>14} | "
              f"{'diff dg / cb':>17} | config")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['m']:>5} {r['n']:>6} {r['k']:>6} | {r['dgemm_tflops']:>6.0f} {r['cublas_tflops']:>6.0f} "
              f"{r['bf16_tflops']:>6.0f} | {r['ratio']:>5.2f} [{r['ratio_min']:.2f}..{r['ratio_max']:.2f}] | "
              f"{r['dgemm_us']:>7.1f} /{r['cublas_us']:>7.1f} | "
              f"{r['dgemm_call_us']:>6.1f} /{r['cublas_call_us']:>6.1f} | "
              f"{r['diff']:.1e} / {r.get('cublas_diff', float('nan')):.1e} | {r['config']}")
        if "sweep" in r:
            best = sorted(r["sweep"].items(), key=lambda kv: -kv[1])[:6]
            print("      sweep best: " + ", ".join(f"{c}={t:.0f}" for c, t in best))
    if all("deepgemm_ratio" in r for r in rows):
        print(f"\n{'M':>5} {'N':>6} {'K':>6} | {'dgemm':>6} {'DeepGEMM':>8} | "
              f"{'dgemm / DeepGEMM [lowest round]':>31} | diff DeepGEMM")
        for r in rows:
            print(f"{r['m']:>5} {r['n']:>6} {r['k']:>6} | {r['dgemm_tflops']:>6.0f} "
                  f"{r['deepgemm_tflops']:>8.0f} | {r['deepgemm_ratio']:>22.3f} "
                  f"[{r['deepgemm_ratio_min']:.2f}] | {r['deepgemm_diff']:.1e}")
        deep = [r["deepgemm_ratio"] for r in rows]
        print(f"geomean dgemm / DeepGEMM (same run): {geomean(deep):.3f}   min: {min(deep):.3f}")
    ratios = [r["ratio"] for r in rows]
    medians = [r["dgemm_tflops"] / r["cublas_tflops"] for r in rows]
    print(f"geomean dgemm / cuBLAS-blk: {geomean(ratios):.3f} (paired rounds; of the median "
          f"TFLOPS: {geomean(medians):.3f})   min: {min(ratios):.3f}   "
          f"lowest round: {min(r['ratio_min'] for r in rows):.3f}   "
          f"max diff: {max(r['diff'] for r in rows):.1e}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=pathlib.Path, default=SHAPES_FILE)
    parser.add_argument("--extra", action="append", default=[],
                        help="extra shape M,N,K (repeatable)")
    parser.add_argument("--sweep", action="store_true",
                        help="also time other tile configs for each shape")
    parser.add_argument("--sweep-block-n", default="",
                        help="comma-separated block_n values for --sweep (default: all legal)")
    parser.add_argument("--sweep-multicast", default="1",
                        help="comma-separated cluster sizes for --sweep (1 and/or 2)")
    parser.add_argument("--only", default="", help="comma-separated row indices to run")
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_gemm: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    shapes = dense_shapes(load_shapes(args.shapes)) + [tuple(int(v) for v in s.split(",")) for s in args.extra]
    if args.only:
        shapes = [shapes[int(i)] for i in args.only.split(",")]
    block_ns = [int(v) for v in args.sweep_block_n.split(",") if v]
    multicasts = tuple(int(v) for v in args.sweep_multicast.split(",") if v)
    precompile(shapes, args.sweep, block_ns, multicasts)
    rows = []
    for m, n, k in shapes:
        rows.append(bench_shape(m, n, k, args.sweep, block_ns, multicasts))
        r = rows[-1]
        print(f"  {m}x{n}x{k}: dgemm {r['dgemm_tflops']:.0f} TFLOPS, cuBLAS-blk "
              f"{r['cublas_tflops']:.0f}, ratio {r['ratio']:.2f}, diff {r['diff']:.1e}", flush=True)
    print_table(rows, f"fp8_gemm_nt on {gpu_name()}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
