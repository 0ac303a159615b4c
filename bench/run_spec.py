"""Run one dense GEMM with a chosen tile config, for profilers (ncu) and quick timing.

    python -m bench.run_spec M N K BLOCK_M BLOCK_N STAGES [MULTICAST] [--iters N] [--json]

STAGES 0 takes the heuristic's pipeline depth for the tile; MULTICAST 2 makes 2-CTA clusters
sharing A. Launches the kernel `iters` times (default 3)
after one warm-up and prints its mean kernel time; under `ncu --kernel-name regex:fp8_gemm
--launch-skip 1 --launch-count 1` it profiles one launch of exactly that config.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

import dgemm
from dgemm.heuristics import select

from .inputs import mn_major, random_dense
from .timing import kernel_time_us


def main(argv=None) -> int:
    from dgemm.kernels import hopper_fp8

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("shape", type=int, nargs="+", help="M N K BLOCK_M BLOCK_N STAGES [MC]")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print one JSON line (us, tflops, diff)")
    args = p.parse_args(argv)
    if len(args.shape) not in (6, 7):
        p.error(f"expected M N K BLOCK_M BLOCK_N STAGES [MC]; got {len(args.shape)} numbers")
    m, n, k, bm, bn, stages = args.shape[:6]
    mc = args.shape[6] if len(args.shape) > 6 else 1
    if not torch.cuda.is_available():
        print("run_spec: needs a CUDA GPU", file=sys.stderr)
        return 2
    case = random_dense(m, n, k)
    (a, sa), (b, sb) = mn_major(case.a), case.b
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    spec = hopper_fp8.with_tile(select("fp8_gemm_nt", m, n, k, num_sms=dgemm.get_num_sms()),
                                bm, bn, num_tma_multicast=mc, multicast_on_a=mc > 1)
    if stages:
        spec = dataclasses.replace(spec, num_stages=stages)
    us = kernel_time_us(lambda: hopper_fp8.launch(spec, a, sa, b, sb, d, None),
                        iters=args.iters, warmup=1)
    tflops = 2 * m * n * k / us / 1e6
    diff = dgemm.calc_diff(d, case.ref)
    if args.json:
        print(json.dumps({"us": us, "tflops": tflops, "diff": diff}))
    else:
        print(f"{m}x{n}x{k} {spec.block_m}x{spec.block_n}x{spec.num_stages}/mc{mc}: "
              f"{us:.1f} us, {tflops:.0f} TFLOPS, calc_diff {diff:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
