"""Run (shape, config) pairs each in its own process, so that a kernel that faults names itself.

    python -m bench.probe_configs dense:4x36864x7168:64x192x6/mc1 \
        masked:32x64:4096x7168:64x192x6/mc1 dense:4x36864x7168:deepgemm [--calls 50] [--jobs 4]

An item is LAYOUT:SHAPE:CONFIG. dense: SHAPE is MxNxK; contiguous and masked: GROUPSxM:NxK, the
key of a grouped entry of the broad suite (bench/suite.py; its rows are drawn as the benches
draw them). CONFIG is BLOCK_MxBLOCK_NxSTAGES/mc1|mc2a|mc2b, `heuristic` (the public call) or
`deepgemm`. Each item runs `calls` back-to-back launches on random inputs in a fresh process
(with `--flush`, each after an L2-flushing memset, as the benches time them), then
synchronizes and checks calc_diff over the valid rows; a CUDA fault (which poisons the whole
CUDA context, so a benchmark process cannot go on after it) fails that item alone.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import subprocess
import sys

DIFF_BAR = 1e-3


def run_one(item: str, calls: int, flush: bool = False) -> int:
    import torch

    import dgemm

    from . import bench_gemm, bench_grouped
    from . import suite as suites
    from .baselines import deep_gemm_dense, deep_gemm_module
    from .inputs import mn_major, random_dense

    layout, *shape_parts, config = item.split(":")
    shape = ":".join(shape_parts)
    if layout == "dense":
        m, n, k = (int(v) for v in shape.split("x"))
        data = random_dense(m, n, k)
        a, b = mn_major(data.a), data.b
        d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        if config == "deepgemm":
            fn = deep_gemm_dense(deep_gemm_module(), a, b, d)
        elif config == "heuristic":
            fn = lambda: dgemm.fp8_gemm_nt(a, b, d)  # noqa: E731
        else:
            from dgemm.kernels import hopper_fp8
            spec = bench_gemm.spec_from_config(bench_gemm.spec_of(m, n, k), config)
            fn = lambda: hopper_fp8.launch(spec, a[0], a[1], b[0], b[1], d, None)  # noqa: E731
        check = lambda: dgemm.calc_diff(d, data.ref)  # noqa: E731
    else:
        groups_m, nk = shape.split(":")
        key = f"{layout}:{groups_m}:{nk}"
        case = next(c for c in suites.grouped_cases("broad", layout) if c.key() == key)
        problem = (bench_grouped.setup_contiguous if layout == "contiguous"
                   else bench_grouped.setup_masked)(case, deep_gemm_module())
        out = problem.new_output()
        if config == "deepgemm":
            fn = problem.deep(out)
        elif config == "heuristic":
            fn, out = problem.run, problem.out
        else:
            spec = bench_gemm.spec_from_config(
                bench_grouped.spec_of(case, bench_grouped.select_m_of(case)), config)
            fn = lambda: problem.launch(spec, out)  # noqa: E731
        check = lambda: problem.diff(out)  # noqa: E731
    scratch = torch.empty(256 << 20, dtype=torch.int8, device="cuda") if flush else None
    for _ in range(calls):
        if flush:
            scratch.zero_()               # as the timed rounds do between calls
        fn()
    torch.cuda.synchronize()
    diff = check()
    print(f"diff {diff:.1e}")
    return 0 if diff < DIFF_BAR else 1


def probe(item: str, calls: int, flush: bool = False) -> str:
    try:
        done = subprocess.run([sys.executable, "-m", "bench.probe_configs", "--one", item,
                               "--calls", str(calls)] + (["--flush"] if flush else []),
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return f"{item}: HUNG (no result in 120 s)"
    lines = (done.stdout + done.stderr).strip().splitlines()
    last = next((line for line in reversed(lines) if "Error" in line or "diff" in line),
                lines[-1] if lines else "")
    return f"{item}: {'OK' if done.returncode == 0 else f'FAIL rc={done.returncode}'} {last[:300]}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("items", nargs="*")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--flush", action="store_true",
                        help="flush the L2 (256 MB memset) before every call, as the benches do")
    args = parser.parse_args(argv)
    if args.one:
        return run_one(args.one, args.calls, args.flush)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda item: probe(item, args.calls, args.flush), args.items):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
