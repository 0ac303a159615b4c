"""Session 32 probe: per-CTA event clocks of dgemm's dense kernel built from a csrc tree whose
fp8_gemm.cuh writes clock64 stamps into `dgemm_trace` (a patched copy: .exp/trace, see
trace.patch beside this file). One launch after an L2 flush per repetition; prints, per event,
the median over CTAs of (event - CTA entry) in SM cycles, and the spread of the CTAs' lifetimes.

    PYTHONPATH=. python bench/results/session32/trace_probe.py --shape 128,4096,7168 \
        --config 64x64x12@$PWD/.exp/trace [--reps 5]
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch
from cuda.bindings import driver

from bench.compare_tiles import base_spec, load, parse_config, prepare

EVENTS = {0: "entry", 2: "init synced", 3: "producer: first TMA", 4: "B scales staged",
          5: "wg0: stage 0 full", 6: "wg1: stage 1 full", 20: "block K-2 full",
          21: "block K-1 full", 7: "wg0: K loop done", 8: "wg1: K loop done",
          9: "wg0: hand-over done", 10: "wg0: TMA store issued", 13: "producer: last TMA",
          11: "wg0: stores complete", 15: "producer exits"}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", required=True)
    p.add_argument("--config", action="append", required=True)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    m, n, k = (int(v) for v in args.shape.split(","))
    fns, rows, _ = prepare(m, n, k, args.config)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for text in args.config:
        spec, csrc = parse_config(text, base_spec(m, n, k, 0))
        kernel = load(spec, csrc)
        ptr, size = driver.cuModuleGetGlobal(kernel.module, b"dgemm_trace")[1:]
        per_event = {e: [] for e in EVENTS}
        life, starts = [], []
        for _ in range(args.reps):
            driver.cuMemsetD8(ptr, 0, size)
            flush.zero_()
            torch.cuda.synchronize()
            fns[text]()
            torch.cuda.synchronize()
            host = np.zeros(size // 8, dtype=np.uint64)
            driver.cuMemcpyDtoH(host.ctypes.data, ptr, size)
            t = host.reshape(-1, 32).astype(np.int64)
            ctas = [c for c in range(t.shape[0]) if t[c, 0] != 0 and t[c, 11] != 0]
            for c in ctas:
                for e in EVENTS:
                    if t[c, e]:
                        per_event[e].append(int(t[c, e] - t[c, 0]))
                life.append(int(t[c, 11] - t[c, 0]))
            g0 = min(int(t[c, 1]) for c in ctas)
            starts += [int(t[c, 1]) - g0 for c in ctas]
        print(f"\n{m}x{n}x{k} {text}  diff {rows[text]['diff']:.1e}  ({args.reps} launches)")
        print(f"  CTA lifetime (entry -> stores complete): median {statistics.median(life):,.0f} "
              f"min {min(life):,} max {max(life):,} cycles")
        print(f"  CTA entry (globaltimer, ns after the first): median "
              f"{statistics.median(starts):,.0f} max {max(starts):,}")
        for e, name in sorted(EVENTS.items(), key=lambda kv: statistics.median(
                per_event[kv[0]]) if per_event[kv[0]] else -1):
            v = per_event[e]
            if v:
                print(f"  {name:24s} median {statistics.median(v):9,.0f}  "
                      f"p10 {np.percentile(v, 10):9,.0f}  p90 {np.percentile(v, 90):9,.0f}")


if __name__ == "__main__":
    main()
