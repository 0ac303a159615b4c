"""Where the contiguous layout's many-group cost comes from (bench/NOTES.md, v12 follow-ups).

    python -m bench.probe_contiguous N K

Times 32 groups of 256 * U(0.7, 1.3) rows (the benchmark's draw) with the heuristic's tile and
with a few forced ones, then the same padded rows as one group: the gap between the two is what
streaming a different B per group costs.
"""
from __future__ import annotations

import contextlib
import random
import sys

import torch

import dgemm
from dgemm import heuristics

from .inputs import mn_major, random_contiguous
from .timing import kernel_time_us

GROUPS, M_PER_GROUP = 32, 256
# (block_m, block_n[, cluster size]); None: the heuristic's pick.
TILES = [None, (128, 256, 2), (128, 128), (128, 128, 2)]


def run_case(name: str, rows, n: int, k: int, tile=None) -> None:
    case = random_contiguous(rows, n, k)
    a = mn_major(case.a)
    d = torch.empty(case.m_indices.numel(), n, device="cuda", dtype=torch.bfloat16)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, case.b, d, case.m_indices)  # noqa: E731
    with heuristics.forced_tile(*tile) if tile else contextlib.nullcontext():
        run()
        us = kernel_time_us(run)
    padded, valid = case.m_indices.numel(), sum(rows)
    print(f"{name:<24} tile={tile} valid={valid} padded={padded} {us:7.1f} us  "
          f"valid-TFLOPS {2 * valid * n * k / us / 1e6:6.0f}  "
          f"padded-TFLOPS {2 * padded * n * k / us / 1e6:6.0f}", flush=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("probe_contiguous: needs a CUDA GPU", file=sys.stderr)
        return 2
    n, k = int(argv[0]), int(argv[1])
    rng = random.Random(0)
    rows = [int(M_PER_GROUP * rng.uniform(0.7, 1.3)) for _ in range(GROUPS)]
    for tile in TILES:
        run_case(f"{GROUPS} groups", rows, n, k, tile)
    align = dgemm.get_mk_alignment_for_contiguous_layout()
    run_case("same rows, 1 group", [sum(dgemm.ceil_div(r, align) * align for r in rows)], n, k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
