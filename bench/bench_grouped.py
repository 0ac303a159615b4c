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

import dgemm  # noqa: E402
from common import calc_diff, gpu_name, kernel_time_us  # noqa: E402

SHAPES = pathlib.Path(__file__).resolve().parents[1] / "dgemm" / "shapes" / "deepseek_v3.json"
# DeepGEMM @03d0be3 on one H200, from ../shared/BENCH.md (same order as the shapes file).
DEEPGEMM_CONTIGUOUS = [1343, 1257, 1303, 1245, 966, 908]
DEEPGEMM_MASKED = [874, 753, 778, 718, 725, 593]


def cast_groups(x: torch.Tensor, cast):
    pairs = [cast(x[i]) for i in range(x.shape[0])]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def dense_tflops(m: int, n: int, k: int) -> float:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a_fp8, a_scales = dgemm.per_token_cast_to_fp8(x)
    a = (a_fp8, dgemm.get_mn_major_tma_aligned_tensor(a_scales))
    b = dgemm.per_block_cast_to_fp8(w)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return 2 * m * n * k / kernel_time_us(lambda: dgemm.fp8_gemm_nt(a, b, d)) / 1e6


def bench_contiguous(case, rng):
    g, n, k = case["groups"], case["n"], case["k"]
    align = dgemm.get_mk_alignment_for_contiguous_layout()
    rows = [int(case["m_per_group"] * rng.uniform(0.7, 1.3)) for _ in range(g)]
    padded = [dgemm.ceil_div(r, align) * align for r in rows]
    m_sum = sum(padded)
    x = torch.randn(m_sum, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
    m_indices = torch.full((m_sum,), -1, device="cuda", dtype=torch.int32)
    start = 0
    for i, (r, p) in enumerate(zip(rows, padded)):
        m_indices[start:start + r] = i
        start += p
    a_fp8, a_scales = dgemm.per_token_cast_to_fp8(x)
    a = (a_fp8, dgemm.get_mn_major_tma_aligned_tensor(a_scales))
    b = cast_groups(w, dgemm.per_block_cast_to_fp8)
    d = torch.empty(m_sum, n, device="cuda", dtype=torch.bfloat16)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices)  # noqa: E731
    run()
    diffs = []
    for i in range(g):
        sel = m_indices == i
        diffs.append(calc_diff(d[sel], x[sel].float() @ w[i].float().t()))
    valid = sum(rows)
    tflops = 2 * valid * n * k / kernel_time_us(run) / 1e6
    return valid, tflops, max(diffs)


def bench_masked(case, rng):
    g, max_m, n, k = case["groups"], case["max_m"], case["n"], case["k"]
    masked = [int(case["expected_m"] * rng.uniform(0.7, 1.3)) for _ in range(g)]
    x = torch.randn(g, max_m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
    a_fp8, a_scales = cast_groups(x, dgemm.per_token_cast_to_fp8)
    a = (a_fp8, dgemm.get_mn_major_tma_aligned_tensor(a_scales))
    b = cast_groups(w, dgemm.per_block_cast_to_fp8)
    d = torch.empty(g, max_m, n, device="cuda", dtype=torch.bfloat16)
    masked_m = torch.tensor(masked, device="cuda", dtype=torch.int32)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, case["expected_m"])  # noqa: E731
    run()
    diffs = [calc_diff(d[i, :r], x[i, :r].float() @ w[i].float().t()) for i, r in enumerate(masked)]
    valid = sum(masked)
    tflops = 2 * valid * n * k / kernel_time_us(run) / 1e6
    return valid, tflops, max(diffs)


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
