"""Where the contiguous layout's many-group cost comes from (bench/NOTES.md, v12 follow-ups).

    python bench/probe_contiguous.py N K

Times 32 groups of 256 * U(0.7, 1.3) rows (the benchmark's draw) with the heuristic's tile and
with a few forced ones, then the same padded rows as one group: the gap between the two is what
streaming a different B per group costs.
"""
from __future__ import annotations

import contextlib
import random
import sys

import torch

from bench_grouped import mn_major  # also puts the repo root and tests/gpu on sys.path
import dgemm  # noqa: E402
from common import kernel_time_us  # noqa: E402
from helpers import forced_tile, random_contiguous  # noqa: E402

GROUPS, M_PER_GROUP = 32, 256


def run_case(name: str, rows, n: int, k: int, tile=None) -> None:
    case = random_contiguous(rows, n, k)
    a = mn_major(case.a)
    d = torch.empty(case.m_indices.numel(), n, device="cuda", dtype=torch.bfloat16)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, case.b, d, case.m_indices)  # noqa: E731
    with forced_tile(*tile) if tile else contextlib.nullcontext():
        run()
        us = kernel_time_us(run)
    padded, valid = case.m_indices.numel(), sum(rows)
    print(f"{name:<24} tile={tile} valid={valid} padded={padded} {us:7.1f} us  "
          f"valid-TFLOPS {2 * valid * n * k / us / 1e6:6.0f}  "
          f"padded-TFLOPS {2 * padded * n * k / us / 1e6:6.0f}", flush=True)


def main() -> int:
    n, k = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(0)
    rows = [int(M_PER_GROUP * rng.uniform(0.7, 1.3)) for _ in range(GROUPS)]
    for tile in (None, (128, 256, 2), (128, 128), (128, 128, 2)):
        run_case(f"{GROUPS} groups", rows, n, k, tile)
    align = dgemm.get_mk_alignment_for_contiguous_layout()
    run_case("same rows, 1 group", [sum(dgemm.ceil_div(r, align) * align for r in rows)], n, k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
