"""Run (shape, config) pairs each in its own process, so that a kernel that faults names itself.

    python -m bench.probe_configs dense:4x36864x7168:64x192x6/mc1 \
        masked:32x64:4096x7168:64x192x6/mc1 dense:4x36864x7168:deepgemm [--calls 50] [--jobs 4]

An item is LAYOUT:SHAPE:CONFIG. dense: SHAPE is MxNxK; contiguous and masked: GROUPSxM:NxK, the
key of a grouped entry of the broad suite (bench/suite.py; its rows are drawn as the benches
draw them). CONFIG is BLOCK_MxBLOCK_NxSTAGES/mc1|mc2a|mc2b, `heuristic` (the public call) or
`deepgemm`; several configs joined by `+` run in one process on the same inputs, one call of
each in turn. Each item runs `calls` rounds of launches on random inputs in a fresh process
(with `--flush`, each after an L2-flushing memset, as the benches time them; with `--rounds R`,
R of the benches' profiled rounds of `calls` calls per config instead), then synchronizes and
checks calc_diff over the valid rows; a CUDA fault (which poisons the whole CUDA context, so a
benchmark process cannot go on after it) fails that item alone. Grouped keys are looked up in
the DeepSeek-V3 suite, then the broad one.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import subprocess
import sys

DIFF_BAR = 1e-3


def run_one(item: str, calls: int, flush: bool = False, rounds: int = 0) -> int:
    import torch

    import dgemm

    from . import bench_gemm, bench_grouped
    from . import suite as suites
    from .baselines import deep_gemm_dense, deep_gemm_module
    from .inputs import mn_major, random_dense
    from .timing import interleaved_samples

    layout, *shape_parts, configs = item.split(":")
    shape = ":".join(shape_parts)
    runs = {}                             # config -> (fn, check)
    if layout == "dense":
        m, n, k = (int(v) for v in shape.split("x"))
        data = random_dense(m, n, k)
        a, b = mn_major(data.a), data.b
        for config in configs.split("+"):
            d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            if config == "deepgemm":
                fn = deep_gemm_dense(deep_gemm_module(), a, b, d)
            elif config == "heuristic":
                fn = lambda d=d: dgemm.fp8_gemm_nt(a, b, d)  # noqa: E731
            else:
                from dgemm.kernels import hopper_fp8
                spec = bench_gemm.spec_from_config(bench_gemm.spec_of(m, n, k), config)
                fn = (lambda spec=spec, d=d:  # noqa: E731
                      hopper_fp8.launch(spec, a[0], a[1], b[0], b[1], d, None))
            runs[config] = (fn, lambda d=d: dgemm.calc_diff(d, data.ref))
    else:
        groups_m, nk = shape.split(":")
        key = f"{layout}:{groups_m}:{nk}"
        suite = "deepseek_v3" if any(c.key() == key for c in suites.grouped_cases(
            "deepseek_v3", layout)) else "broad"
        case = next(c for c in suites.grouped_cases(suite, layout) if c.key() == key)
        problem = (bench_grouped.setup_contiguous if layout == "contiguous"
                   else bench_grouped.setup_masked)(case, deep_gemm_module())
        for config in configs.split("+"):
            out = problem.new_output()
            if config == "deepgemm":
                fn = problem.deep(out)
            elif config == "heuristic":
                fn, out = problem.run, problem.out
            else:
                spec = bench_gemm.spec_from_config(
                    bench_grouped.spec_of(case, bench_grouped.select_m_of(case)), config)
                fn = lambda spec=spec, out=out: problem.launch(spec, out)  # noqa: E731
            runs[config] = (fn, lambda out=out: problem.diff(out))
    if rounds:
        # The benches' timed rounds: every config's L2-flushed calls in one profiler session.
        samples = interleaved_samples({name: fn for name, (fn, _) in runs.items()}, rounds,
                                      calls)
        medians = {name: statistics.median(us) for name, us in samples.items()}
        base = medians.get("deepgemm")
        for name, us in medians.items():
            # DeepGEMM time / config time: above 1 is faster than DeepGEMM.
            versus = f"  x DeepGEMM {base / us:.3f}" if base else ""
            print(f"{name} {us:.1f} us{versus}")
    else:
        scratch = torch.empty(256 << 20, dtype=torch.int8, device="cuda") if flush else None
        for _ in range(calls):
            for fn, _ in runs.values():
                if flush:
                    scratch.zero_()       # as the timed rounds do between calls
                fn()
    torch.cuda.synchronize()
    worst = 0.0
    for name, (_, check) in runs.items():
        diff = check()
        worst = max(worst, diff if diff == diff else float("inf"))
        print(f"{name} diff {diff:.1e}")
    return 0 if worst < DIFF_BAR else 1


def probe(item: str, calls: int, flush: bool = False, rounds: int = 0) -> str:
    try:
        done = subprocess.run([sys.executable, "-m", "bench.probe_configs", "--one", item,
                               "--calls", str(calls), "--rounds", str(rounds)]
                              + (["--flush"] if flush else []),
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return f"{item}: HUNG (no result in 120 s)"
    lines = (done.stdout + done.stderr).strip().splitlines()
    last = next((line for line in reversed(lines) if "Error" in line or "diff" in line),
                lines[-1] if lines else "")
    timed = "".join(f"\n    {line}" for line in lines if line.endswith(" us") or " us  x " in line)
    return (f"{item}: {'OK' if done.returncode == 0 else f'FAIL rc={done.returncode}'} "
            f"{last[:300]}{timed}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("items", nargs="*")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--flush", action="store_true",
                        help="flush the L2 (256 MB memset) before every call, as the benches do")
    parser.add_argument("--rounds", type=int, default=0,
                        help="time the configs as the benches do instead: ROUNDS rounds of "
                             "CALLS L2-flushed calls each, all configs in one profiler session")
    args = parser.parse_args(argv)
    if args.one:
        return run_one(args.one, args.calls, args.flush, args.rounds)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda item: probe(item, args.calls, args.flush, args.rounds),
                             args.items):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
