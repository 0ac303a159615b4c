"""Host cost of one cached GEMM call from Python, where decode-size GEMMs spend their time.

    python -m bench.bench_call [--calls N] [--repeats R] [--json FILE] [--cpu-stub]

At M = 64 for four (N, K) pairs of DeepSeek-V3: the wall time of N back-to-back calls / N
(median of R runs, after warm-up; the kernels take ~10 us, so this is the host path whenever
it is longer) for dgemm with A scales already MN-major and TMA-aligned ("pre"), with the
row-major scales `per_token_cast_to_fp8` returns ("row"), with `d=None` ("d=None"), the
contiguous grouped GEMM (2 groups x 128 rows) and the masked one (4 groups, max_m = 64,
expected_m = 64); cuBLAS-blk (`torch._scaled_mm` with block scales) and DeepGEMM's
`fp8_gemm_nt` (pre-transformed and row-major scales) when `deep_gemm` imports, in the same
process. Run it under two checkouts of dgemm to compare their launch paths on one machine.

`--cpu-stub`: no GPU: CPU tensors and a recording stand-in for libcuda (bench/stub_launch.py),
so the numbers are dgemm's Python path without the driver's launch work.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch

import dgemm

PAIRS = ((2112, 7168), (24576, 1536), (7168, 2048), (4096, 7168))
M = 64


ISSUE_CALLS = 200     # well under the driver's launch queue, so issuing never waits on the GPU


def host_us(fns: dict, calls: int, repeats: int, sync) -> tuple:
    """({key: wall}, {key: issue}) in us per call, medians over `repeats` rounds: wall = time
    of `calls` back-to-back calls up to the GPU finishing them / calls (the kernel time where
    it is longer than the host path); issue = time to issue ISSUE_CALLS calls from an idle GPU,
    not waiting for them / ISSUE_CALLS: the host path alone, whatever the kernel takes. Every
    round times every function in turn, so a host that drifts (clock, neighbours) moves all
    columns alike and their differences stay meaningful."""
    for fn in fns.values():
        for _ in range(max(10, calls // 10)):
            fn()
    sync()
    walls = {key: [] for key in fns}
    issues = {key: [] for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            walls[key].append((time.perf_counter() - start) / calls * 1e6)
            start = time.perf_counter()
            for _ in range(ISSUE_CALLS):
                fn()
            issues[key].append((time.perf_counter() - start) / ISSUE_CALLS * 1e6)
            sync()
    return ({key: statistics.median(v) for key, v in walls.items()},
            {key: statistics.median(v) for key, v in issues.items()})


def _inputs(n: int, k: int, device: str, groups: int = 1, rows: int = M, batched=False):
    """(a with MN-major scales, a with row-major scales, b, d) for one call."""
    shape_a = (groups, rows, k) if batched else (rows, k)
    a = torch.zeros(shape_a, dtype=torch.float8_e4m3fn, device=device)
    sa_rows = torch.ones(shape_a[:-1] + (k // 128,), dtype=torch.float32, device=device)
    sa = dgemm.get_mn_major_tma_aligned_tensor(sa_rows)
    b_shape = (groups, n, k) if groups > 1 else (n, k)
    b = torch.zeros(b_shape, dtype=torch.float8_e4m3fn, device=device)
    sb = torch.ones(b_shape[:-2] + ((n + 127) // 128, k // 128), dtype=torch.float32,
                    device=device)
    d = torch.empty(shape_a[:-1] + (n,), dtype=torch.bfloat16, device=device)
    return (a, sa), (a, sa_rows), (b, sb), d


def measure(n: int, k: int, calls: int, repeats: int, device: str, sync) -> dict:
    a, a_rows, b, d = _inputs(n, k, device)
    fns = {"pre": lambda: dgemm.fp8_gemm_nt(a, b, d),
           "row": lambda: dgemm.fp8_gemm_nt(a_rows, b, d),
           "d_none": lambda: dgemm.fp8_gemm_nt(a, b)}

    ca, _, cb, cd = _inputs(n, k, device, groups=2, rows=256)
    layout = torch.cat([torch.zeros(128, dtype=torch.int32, device=device),
                        torch.ones(128, dtype=torch.int32, device=device)])
    fns["contiguous"] = lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(ca, cb, cd, layout)
    ma, _, mb, md = _inputs(n, k, device, groups=4, rows=M, batched=True)
    masked_m = torch.full((4,), M, dtype=torch.int32, device=device)
    fns["masked"] = lambda: dgemm.m_grouped_fp8_gemm_nt_masked(ma, mb, md, masked_m, M)

    if device == "cuda":
        from .baselines import cublas_blockwise, deep_gemm_module
        fns["cublas"] = cublas_blockwise(a_rows, b, M)
        deep_gemm = deep_gemm_module()
        if deep_gemm is not None:
            d_deep = torch.empty_like(d)
            fns["deepgemm_pre"] = lambda: deep_gemm.fp8_gemm_nt(a, b, d_deep)
            fns["deepgemm_row"] = lambda: deep_gemm.fp8_gemm_nt(a_rows, b, d_deep)
    walls, issue = host_us(fns, calls, repeats, sync)
    return {"m": M, "n": n, "k": k, **walls, "issue": issue}


COLUMNS = (("pre", "pre"), ("row", "row"), ("d_none", "d=None"), ("contiguous", "contig"),
           ("masked", "masked"), ("cublas", "cuBLAS-blk"), ("deepgemm_pre", "DG pre"),
           ("deepgemm_row", "DG row"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument("--cpu-stub", action="store_true",
                        help="no GPU: time dgemm's Python path against a stand-in driver")
    args = parser.parse_args()
    if args.cpu_stub:
        from .stub_launch import stubbed_launch
        with stubbed_launch(record=False):
            rows = [measure(n, k, args.calls, args.repeats, "cpu", lambda: None)
                    for n, k in PAIRS]
        where = "CPU, driver stubbed (bench/stub_launch.py)"
    else:
        from .timing import gpu_name
        rows = [measure(n, k, args.calls, args.repeats, "cuda", torch.cuda.synchronize)
                for n, k in PAIRS]
        where = gpu_name()
    for what, values in (("wall", lambda row: row), ("issue (host path alone)",
                                                     lambda row: row["issue"])):
        print(f"per-call us at M={M}, {what}, on {where} (dgemm from {dgemm.__file__})")
        shown = [(key, title) for key, title in COLUMNS if any(key in row for row in rows)]
        print(f"{'N':>6} {'K':>6} | " + " ".join(f"{title:>10}" for _, title in shown))
        for row in rows:
            got = values(row)
            print(f"{row['n']:>6} {row['k']:>6} | " + " ".join(
                f"{got[key]:>10.1f}" if key in got else f"{'-':>10}" for key, _ in shown))
    issue_means = {key: math.exp(statistics.fmean(math.log(row["issue"][key]) for row in rows))
                   for key, _ in COLUMNS if all(key in row["issue"] for row in rows)}
    print("geomean issue us: " + ", ".join(f"{key} {value:.2f}"
                                           for key, value in issue_means.items()))
    for ours, theirs in (("pre", "deepgemm_pre"), ("row", "deepgemm_row"), ("pre", "cublas")):
        if ours in issue_means and theirs in issue_means:
            print(f"  {theirs} / dgemm {ours}: {issue_means[theirs] / issue_means[ours]:.2f}x")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"where": where, "dgemm": dgemm.__file__, "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
