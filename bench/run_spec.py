"""Run one dense GEMM with a chosen tile config, for profilers (ncu) and quick timing.

    python bench/run_spec.py M N K BLOCK_M BLOCK_N STAGES [MULTICAST] [--iters N] [--json]

Launches the kernel `iters` times (default 3) after one warm-up and prints its mean kernel
time; under `ncu --kernel-name regex:fp8_gemm --launch-skip 1 --launch-count 1` it profiles
one launch of exactly that config.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

import dgemm
from dgemm.heuristics import select
from dgemm.launch import hopper

sys.path.insert(0, "bench")
from common import kernel_time_us  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("shape", type=int, nargs="+", help="M N K BLOCK_M BLOCK_N STAGES [MC]")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print one JSON line (us, tflops, diff)")
    args = p.parse_args()
    m, n, k, bm, bn, stages = args.shape[:6]
    mc = args.shape[6] if len(args.shape) > 6 else 1
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a, sa = dgemm.per_token_cast_to_fp8(x)
    sa = dgemm.get_mn_major_tma_aligned_tensor(sa)
    b, sb = dgemm.per_block_cast_to_fp8(w)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    spec = dataclasses.replace(select("fp8_gemm_nt", m, n, k), block_m=bm, block_n=bn,
                               num_stages=stages, num_tma_multicast=mc, multicast_on_a=mc > 1)
    us = kernel_time_us(lambda: hopper.launch(spec, a, sa, b, sb, d, None), iters=args.iters,
                        warmup=1)
    tflops = 2 * m * n * k / us / 1e6
    diff = dgemm.utils.calc_diff(d, x.float() @ w.float().t())
    if args.json:
        print(json.dumps({"us": us, "tflops": tflops, "diff": diff}))
    else:
        print(f"{m}x{n}x{k} {bm}x{bn}x{stages}/mc{mc}: {us:.1f} us, {tflops:.0f} TFLOPS, "
              f"calc_diff {diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
