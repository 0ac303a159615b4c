"""Session 32 probe: DeepGEMM 54e2261's per-CTA event clocks (its kernel patched by
dg_trace_patch.py, imported from PYTHONPATH) at one dense shape: one launch after an L2 flush
per repetition, medians over CTAs of cycles after each CTA's entry.
    PYTHONPATH=/tmp/dgt:. python dg_trace_probe.py --shape 128,4096,7168 --reps 5"""
import argparse
import statistics

import numpy as np
import torch

import deep_gemm
from bench.inputs import mn_major, random_dense

NAMES = ["producer: first TMA", "producer: last TMA", "math: B scales loaded",
         "math: stage 0 full", "math: K loop done", "math: TMA store issued",
         "math: stores complete"]

p = argparse.ArgumentParser()
p.add_argument("--shape", required=True)
p.add_argument("--reps", type=int, default=5)
args = p.parse_args()
m, n, k = (int(v) for v in args.shape.split(","))
case = random_dense(m, n, k)
a, b = mn_major(case.a), case.b
d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
deep_gemm.fp8_gemm_nt(a, b, d)                     # JIT
torch.cuda.synchronize()
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
per = [[] for _ in NAMES]
for _ in range(args.reps):
    b[1].zero_()
    flush.zero_()
    torch.cuda.synchronize()
    deep_gemm.fp8_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    t = b[1].view(torch.int32).flatten().cpu().numpy().view(np.uint32)
    ctas = [t[8 * c: 8 * c + 8] for c in range(132) if 8 * c + 8 <= t.size]
    good = [c for c in ctas if c[7] == 0xdeadbeef and 0 < c[3] < 10**7 and 0 < c[0] < 10**7]
    if not good:
        print("no CTA wrote its clocks: the kernel got a copy of the B scales?")
        break
    for c in good:
        for i, v in enumerate([c[0], c[1], c[2], c[3], c[4], c[5], c[6]]):
            per[i].append(int(v))
print(f"\nDeepGEMM {m}x{n}x{k} ({args.reps} launches, {len(per[0])} CTA records)")
for name, v in sorted(zip(NAMES, per), key=lambda x: statistics.median(x[1]) if x[1] else 0):
    if v:
        print(f"  {name:24s} median {statistics.median(v):9,.0f}  p10 {np.percentile(v, 10):9,.0f}"
              f"  p90 {np.percentile(v, 90):9,.0f}")
