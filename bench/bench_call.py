"""Host cost of one cached GEMM call from Python, where decode-size GEMMs spend their time.

    python -m bench.bench_call [--calls N] [--json FILE]

At M = 64 for four (N, K) pairs of DeepSeek-V3, the wall time of N back-to-back calls / N
(the kernels take ~10 us, so this is the host path whenever it is longer): dgemm with A scales
already MN-major and TMA-aligned, with the row-major scales `per_token_cast_to_fp8` returns,
and with `d=None`; cuBLAS-blk (`torch._scaled_mm`) in the same process. Run it under two
checkouts (e.g. `PYTHONPATH=/old/tree python -m bench.bench_call`) to compare their launch
paths on one machine.
"""
from __future__ import annotations

import argparse
import json

import torch

import dgemm

from .baselines import cublas_blockwise
from .timing import gpu_name, per_call_us

PAIRS = ((2112, 7168), (24576, 1536), (7168, 2048), (4096, 7168))


def measure(m: int, n: int, k: int, calls: int) -> dict:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a_fp8, a_rows = dgemm.per_token_cast_to_fp8(x)
    a = (a_fp8, dgemm.get_mn_major_tma_aligned_tensor(a_rows))
    b = dgemm.per_block_cast_to_fp8(w)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return {
        "m": m, "n": n, "k": k,
        "pre_transformed": per_call_us(lambda: dgemm.fp8_gemm_nt(a, b, d), calls),
        "row_major": per_call_us(lambda: dgemm.fp8_gemm_nt((a_fp8, a_rows), b, d), calls),
        "d_none": per_call_us(lambda: dgemm.fp8_gemm_nt(a, b), calls),
        "cublas": per_call_us(cublas_blockwise(a, b, m), calls),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    rows = [measure(64, n, k, args.calls) for n, k in PAIRS]
    print(f"per-call us at M=64 on {gpu_name()} (dgemm from {dgemm.__file__})")
    print(f"{'N':>6} {'K':>6} | {'pre-transformed':>15} {'row-major':>9} {'d=None':>7} | "
          f"{'cuBLAS-blk':>10}")
    for row in rows:
        print(f"{row['n']:>6} {row['k']:>6} | {row['pre_transformed']:>15.1f} "
              f"{row['row_major']:>9.1f} {row['d_none']:>7.1f} | {row['cublas']:>10.1f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
