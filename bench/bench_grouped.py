"""MoE grouped FP8 GEMM benchmark (contiguous and masked layouts), one run on one GPU.

    python -m bench.bench_grouped [--json out.json] [--sweep 128x128,128x256,...]

TFLOPS count only valid rows. Beside each shape: DeepGEMM's TFLOPS as published in
docs/benchmarks.md (measured on an H200; compare only when this runs on an H200) and our dense
kernel on the same total work (M = valid rows, same N, K), measured in this run.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import random
import sys

import torch

import dgemm
from dgemm import heuristics

from .inputs import (calc_diff_rows, load_shapes, mn_major, random_contiguous, random_dense,
                     random_masked)
from .timing import gpu_name, kernel_time_us

# DeepGEMM @03d0be3 on one H200 (docs/benchmarks.md), in the order of the shapes file.
DEEPGEMM_CONTIGUOUS = [1343, 1257, 1303, 1245, 966, 908]
DEEPGEMM_MASKED = [874, 753, 778, 718, 725, 593]


def dense_tflops(m: int, n: int, k: int) -> float:
    case = random_dense(m, n, k)
    a = mn_major(case.a)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return 2 * m * n * k / kernel_time_us(lambda: dgemm.fp8_gemm_nt(a, case.b, d)) / 1e6


def setup_contiguous(shape, rng):
    """(valid rows, run, max calc_diff of the last run's output)."""
    rows = [int(shape["m_per_group"] * rng.uniform(0.7, 1.3)) for _ in range(shape["groups"])]
    case = random_contiguous(rows, shape["n"], shape["k"])
    a = mn_major(case.a)
    d = torch.empty(case.m_indices.numel(), shape["n"], device="cuda", dtype=torch.bfloat16)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, case.b, d, case.m_indices)  # noqa: E731
    diff = lambda: max(calc_diff_rows(d, case.ref, case.m_indices == g)  # noqa: E731
                       for g in range(len(rows)))
    return sum(rows), run, diff


def setup_masked(shape, rng):
    rows = [int(shape["expected_m"] * rng.uniform(0.7, 1.3)) for _ in range(shape["groups"])]
    case = random_masked(rows, shape["max_m"], shape["n"], shape["k"])
    a = mn_major(case.a)
    d = torch.empty(shape["groups"], shape["max_m"], shape["n"], device="cuda",
                    dtype=torch.bfloat16)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_masked(a, case.b, d, case.masked_m,  # noqa: E731
                                                      shape["expected_m"])
    diff = lambda: max(calc_diff_rows(d[g], case.ref[g], case.valid[g])  # noqa: E731
                       for g in range(len(rows)))
    return sum(rows), run, diff


def measure(valid, shape, run, diff, tile=None):
    """(TFLOPS over valid rows, calc_diff) of `run`, with the heuristic's tile or a forced one."""
    with heuristics.forced_tile(*tile) if tile else contextlib.nullcontext():
        run()
        tflops = 2 * valid * shape["n"] * shape["k"] / kernel_time_us(run) / 1e6
    return tflops, diff()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--sweep", default="",
                        help="also time these tiles on every shape, e.g. 128x128,128x256")
    args = parser.parse_args(argv)
    tiles = [tuple(int(v) for v in t.split("x")) for t in args.sweep.split(",") if t]
    if not torch.cuda.is_available():
        print("bench_grouped: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    rng = random.Random(0)
    manifest = load_shapes()
    rows = []
    for layout, cases, anchors, fn in (
            ("contiguous", manifest["grouped_contiguous"], DEEPGEMM_CONTIGUOUS, setup_contiguous),
            ("masked", manifest["grouped_masked"], DEEPGEMM_MASKED, setup_masked)):
        for case, anchor in zip(cases, anchors):
            valid, run, check = fn(case, rng)
            tflops, diff = measure(valid, case, run, check)
            for tile in tiles:
                if layout == "contiguous" and tile[0] > 128:
                    continue            # 128-row group padding
                t, d = measure(valid, case, run, check, tile)
                print(f"    sweep {tile[0]}x{tile[1]}: {t:.0f} TFLOPS (diff {d:.1e})", flush=True)
            dense = dense_tflops(valid, case["n"], case["k"])
            rows.append(dict(layout=layout, groups=case["groups"], valid_m=valid, n=case["n"],
                             k=case["k"], tflops=tflops, deepgemm=anchor, dense=dense, diff=diff))
            print(f"  {layout} G={case['groups']} n={case['n']} k={case['k']}: {tflops:.0f} TFLOPS",
                  flush=True)

    print(f"\ngrouped FP8 GEMMs on {gpu_name()}")
    header = (f"{'layout':<10} {'G':>3} {'valid M':>8} {'N':>5} {'K':>5} | {'dgemm':>6} | "
              f"{'DeepGEMM*':>9} {'ratio':>5} | {'dense same work':>15} {'ratio':>5} | {'diff':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['layout']:<10} {r['groups']:>3} {r['valid_m']:>8} {r['n']:>5} {r['k']:>5} | "
              f"{r['tflops']:>6.0f} | {r['deepgemm']:>9} {r['tflops'] / r['deepgemm']:>5.2f} | "
              f"{r['dense']:>15.0f} {r['tflops'] / r['dense']:>5.2f} | {r['diff']:>7.1e}")
    print("* DeepGEMM column: docs/benchmarks.md, H200; the ratio is meaningful on an H200 only.")
    print(f"min ratio to DeepGEMM: {min(r['tflops'] / r['deepgemm'] for r in rows):.3f}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
