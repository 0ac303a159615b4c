"""MoE grouped FP8 GEMM benchmark (contiguous and masked layouts), one run on one GPU.

    python bench/bench_grouped.py [--json out.json]

TFLOPS count only valid rows. Beside each shape: DeepGEMM's TFLOPS from ../shared/BENCH.md
(measured on an H200; compare only when this runs on an H200) and our dense kernel on the same
total work (M = valid rows, same N, K), measured in this run.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))

import dgemm  # noqa: E402
from common import gpu_name, kernel_time_us  # noqa: E402
from helpers import calc_diff_rows, random_contiguous, random_dense, random_masked  # noqa: E402

SHAPES = pathlib.Path(__file__).resolve().parents[1] / "dgemm" / "shapes" / "deepseek_v3.json"
# DeepGEMM @03d0be3 on one H200, from ../shared/BENCH.md (same order as the shapes file).
DEEPGEMM_CONTIGUOUS = [1343, 1257, 1303, 1245, 966, 908]
DEEPGEMM_MASKED = [874, 753, 778, 718, 725, 593]


def mn_major(pair):
    """Quantised A with its scales already in the kernel's layout, as a training step keeps
    them; otherwise each call would also time a scale transpose."""
    return pair[0], dgemm.get_mn_major_tma_aligned_tensor(pair[1])


def dense_tflops(m: int, n: int, k: int) -> float:
    case = random_dense(m, n, k)
    a = mn_major(case.a)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return 2 * m * n * k / kernel_time_us(lambda: dgemm.fp8_gemm_nt(a, case.b, d)) / 1e6


def bench_contiguous(shape, rng):
    rows = [int(shape["m_per_group"] * rng.uniform(0.7, 1.3)) for _ in range(shape["groups"])]
    case = random_contiguous(rows, shape["n"], shape["k"])
    a = mn_major(case.a)
    d = torch.empty(case.m_indices.numel(), shape["n"], device="cuda", dtype=torch.bfloat16)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, case.b, d, case.m_indices)  # noqa: E731
    run()
    diff = max(calc_diff_rows(d, case.ref, case.m_indices == g) for g in range(len(rows)))
    valid = sum(rows)
    return valid, 2 * valid * shape["n"] * shape["k"] / kernel_time_us(run) / 1e6, diff


def bench_masked(shape, rng):
    rows = [int(shape["expected_m"] * rng.uniform(0.7, 1.3)) for _ in range(shape["groups"])]
    case = random_masked(rows, shape["max_m"], shape["n"], shape["k"])
    a = mn_major(case.a)
    d = torch.empty(shape["groups"], shape["max_m"], shape["n"], device="cuda",
                    dtype=torch.bfloat16)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_masked(a, case.b, d, case.masked_m,  # noqa: E731
                                                      shape["expected_m"])
    run()
    diff = max(calc_diff_rows(d[g], case.ref[g], case.valid[g]) for g in range(len(rows)))
    valid = sum(rows)
    return valid, 2 * valid * shape["n"] * shape["k"] / kernel_time_us(run) / 1e6, diff


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_grouped: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    rng = random.Random(0)
    manifest = json.loads(SHAPES.read_text())
    rows = []
    for layout, cases, anchors, fn in (
            ("contiguous", manifest["grouped_contiguous"], DEEPGEMM_CONTIGUOUS, bench_contiguous),
            ("masked", manifest["grouped_masked"], DEEPGEMM_MASKED, bench_masked)):
        for case, anchor in zip(cases, anchors):
            valid, tflops, diff = fn(case, rng)
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
    print("* DeepGEMM column: ../shared/BENCH.md, H200; the ratio is meaningful on an H200 only.")
    print(f"min ratio to DeepGEMM: {min(r['tflops'] / r['deepgemm'] for r in rows):.3f}")
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
