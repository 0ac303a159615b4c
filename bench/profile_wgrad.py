"""One dense weight-gradient GEMM, a few times, for a profiler to look at (Nsight Compute on
the GPU machine: bench/NOTES.md, wgrad v2): dgemm's kernel (optionally a forced tile, as
bench_wgrad --tile) or DeepGEMM 54e2261's on the same inputs.

    python -m bench.profile_wgrad --impl dgemm --tile 128x1 --shape 4096 7168 8192
"""
from __future__ import annotations

import argparse

import torch

import dgemm
from bench import bench_wgrad

WGRAD = (1, 1, 128)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=("dgemm", "deep_gemm"), default="dgemm")
    parser.add_argument("--tile", type=bench_wgrad.parse_tile)
    parser.add_argument("--shape", type=int, nargs=3, default=(4096, 7168, 8192),
                        metavar=("M", "N", "K"))
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args(argv)
    if args.tile:
        bench_wgrad.force_tile(*args.tile)
    m, n, k = args.shape
    a, _ = bench_wgrad._quantized(m, k)
    b, _ = bench_wgrad._quantized(n, k)
    d = torch.zeros(m, n, device="cuda")
    if args.impl == "dgemm":
        run = lambda: dgemm.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD)   # noqa: E731
    else:
        import deep_gemm
        run = lambda: deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD)   # noqa: E731
    for _ in range(args.iters):
        run()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
