"""Dense FP8 GEMM benchmark: dgemm vs cuBLAS block-scaled FP8 (and DeepGEMM whenever it
imports, cuBLAS bf16 where asked), same run.

    python -m bench.bench_gemm                              # the 18 DeepSeek-V3 shapes
    python -m bench.bench_gemm --suite broad [--part fit|holdout|all]
    python -m bench.bench_gemm --candidates 4               # also the cost model's next picks
    python -m bench.bench_gemm --picks old.json             # another checkout's picks beside
    python -m bench.bench_gemm --sweep                      # every legal tile of each shape
    python -m bench.bench_gemm --json out.json              # machine-readable results
    python -m bench.bench_gemm --autotune                   # dgemm with DGEMM_AUTOTUNE=1

Prints one row per shape (TFLOPS, kernel µs, calc_diff) and the geomean ratios dgemm /
cuBLAS-blk and dgemm / DeepGEMM, per part of the suite (bench/suite.py: "fit" shapes may be
used to tune the heuristic, "holdout" shapes judge it). All implementations run on the same
random inputs (A scales pre-transformed to the MN-major TMA layout for everyone) in the same
process, their kernel times taken in alternating rounds of L2-flushed calls (median round);
each ratio is the median over rounds of the ratio within each round. The DeepSeek-V3 suite
takes 5 rounds of 20 calls, per-call host time and cuBLAS bf16; the broad suite 3 rounds of 10
calls and neither, so the whole suite fits one GPU call. With --autotune every shape's class
is tuned first (bench/autotuning.py) and "dgemm" runs the decisions; the heuristic's own pick
is timed beside it where they differ.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys

import torch

import dgemm
from dgemm.utils import calc_diff

from . import autotuning, report, timing
from . import suite as suites
from .baselines import cublas_blockwise_checked, deep_gemm_dense, deep_gemm_module, warm_deep_gemm_reporting
from .compare_tiles import CLUSTERS
from .inputs import dense_shapes, load_shapes, mn_major, random_dense
from .timing import (CudaFault, add_run_arguments, check_round_times, checked, geomean, gpu_name,
                     interleaved_samples, is_cuda_fault, median, paired_ratios, per_call_us)


@dataclasses.dataclass
class Options:
    rounds: int = 5
    iters: int = 20
    bf16: bool = True
    call_time: bool = True
    candidates: int = 0            # also time the cost model's next picks (0: none)
    picks: dict = dataclasses.field(default_factory=dict)   # shape key -> config (--picks)
    sweep: bool = False
    block_ns: tuple = ()
    multicasts: tuple = (1,)
    check_timing: bool = True      # compare the two ways of timing once, on the first shape
    skip: tuple = ()               # configs never timed beside the pick (e.g. known to fault)
    autotune: bool = False         # dgemm with DGEMM_AUTOTUNE=1 (classes tuned before timing)


def spec_of(m: int, n: int, k: int):
    return dgemm.heuristics.select("fp8_gemm_nt", m, n, k, num_sms=dgemm.get_num_sms())


def spec_from_config(base, config: str):
    """`base` with the tile of BLOCK_MxBLOCK_NxSTAGES/mc1|mc2a|mc2b|ks2 (suite.config_name)."""
    from dgemm.kernels import hopper_fp8

    tile, _, cluster = config.partition("/")
    block_m, block_n, stages = (int(v) for v in tile.split("x"))
    multicast, on_a, k_split = CLUSTERS[cluster]
    spec = hopper_fp8.with_tile(base, block_m, block_n, multicast, on_a, k_split)
    return dataclasses.replace(spec, num_stages=stages)


def extra_specs(m: int, n: int, k: int, opts: Options) -> dict:
    """{column name: spec} timed beside the heuristic's pick: the pick of `--picks` when it
    differs ("picks"), the cost model's next candidates and the sweep's tiles (by config)."""
    from dgemm.kernels import hopper_fp8

    spec = spec_of(m, n, k)
    extra = {}
    other = opts.picks.get(f"dense:{m}x{n}x{k}")
    if other and other != suites.config_name(spec):
        extra["picks"] = spec_from_config(spec, other)
    if opts.candidates:
        ranked = dgemm.heuristics.candidates("fp8_gemm_nt", m, n, k,
                                             num_sms=dgemm.get_num_sms(), count=10 ** 6)
        for candidate in diverse(ranked, opts.candidates):
            extra[suites.config_name(candidate)] = candidate
    if opts.sweep:
        for candidate in sweep_specs(spec, m, opts.block_ns, opts.multicasts):
            if candidate != spec:
                extra.setdefault(suites.config_name(candidate), candidate)
    return {name: s for name, s in extra.items()
            if hopper_fp8.num_stages(s.block_m, s.block_n, s.k)
            and suites.config_name(s) not in opts.skip}


def diverse(ranked: list, count: int) -> list:
    """The cost model's `count` next picks after its first, plus, for each tile height, its
    best tile and its best tile whose width divides 256 (so that a model that misjudges a
    height or the widths that straddle B-scale blocks is caught by the timings)."""
    chosen = ranked[1:count + 1]
    for block_m in sorted({s.block_m for s in ranked}):
        same_height = [s for s in ranked if s.block_m == block_m]
        chosen += same_height[:1]
        chosen += [s for s in same_height if 256 % s.block_n == 0][:1]
    return [s for s in dict.fromkeys(chosen) if s != ranked[0]]


def bench_shape(shape: suites.DenseShape, opts: Options):
    from dgemm.kernels import hopper_fp8

    m, n, k = shape.m, shape.n, shape.k
    case = random_dense(m, n, k)
    a, b, ref = mn_major(case.a), case.b, case.ref
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    flops = 2 * m * n * k
    spec = spec_of(m, n, k)
    heuristic = spec
    if opts.autotune:
        spec = autotuning.chosen_spec("fp8_gemm_nt", m, n, k)
    row = {"m": m, "n": n, "k": k, "part": shape.part, "label": shape.label,
           "config": suites.config_name(spec)}

    run_dgemm = lambda: dgemm.fp8_gemm_nt(a, b, d)  # noqa: E731
    d.fill_(float("nan"))
    checked(row["config"], run_dgemm)
    row["diff"] = calc_diff(d, ref)
    timed = {"dgemm": run_dgemm}
    run_cublas, cublas_out, cublas_error = cublas_blockwise_checked(a, b, m)
    if run_cublas is None:                 # keep the table even if cuBLAS refuses a shape
        row["cublas_error"] = cublas_error
    else:
        row["cublas_diff"] = calc_diff(cublas_out, ref)
        timed["cublas"] = run_cublas
    if opts.bf16:
        timed["bf16"] = lambda: case.x @ case.w.t()
    deep_gemm = deep_gemm_module()
    if deep_gemm is not None:
        d_deep = torch.full_like(d, float("nan"))
        run_deep = deep_gemm_dense(deep_gemm, a, b, d_deep)
        try:
            checked("deepgemm", run_deep)
            row["deepgemm_diff"] = calc_diff(d_deep, ref)
            timed["deepgemm"] = run_deep
        except CudaFault:
            raise
        except RuntimeError as error:
            row["deepgemm_error"] = str(error).splitlines()[0]
    extra_diffs, extras = {}, extra_specs(m, n, k, opts)
    if heuristic != spec:
        extras["heuristic"] = heuristic      # the decision's gain over the heuristic
    for name, other in extras.items():
        d_other = torch.full_like(d, float("nan"))
        fn = (lambda s=other, out=d_other:
              hopper_fp8.launch(s, a[0], a[1], b[0], b[1], out, None))
        checked(suites.config_name(other), fn)
        extra_diffs[name] = calc_diff(d_other, ref)
        timed[name] = fn
    if opts.check_timing:
        print("  " + check_round_times(timed, opts.iters), flush=True)
        opts.check_timing = False
    samples = checked("timed rounds of " + ", ".join(timed),
                      lambda: interleaved_samples(timed, opts.rounds, opts.iters))

    for name in ("dgemm", "cublas", "bf16", "deepgemm"):
        row[f"{name}_us"] = median(samples[name]) if name in samples else float("nan")
        row[f"{name}_tflops"] = flops / row[f"{name}_us"] / 1e6
    if opts.call_time:
        row["dgemm_call_us"] = per_call_us(run_dgemm)
        row["cublas_call_us"] = per_call_us(timed["cublas"]) if "cublas" in timed else float("nan")
    # Each ratio: the median over rounds of the ratio within the round (timed seconds apart),
    # with the lowest and highest round.
    for key, base in (("ratio", "cublas"), ("deepgemm_ratio", "deepgemm")):
        if base in samples:
            rounds = paired_ratios(samples, "dgemm", base)
            row[key], row[f"{key}_min"], row[f"{key}_max"] = median(rounds), min(rounds), max(rounds)
        else:
            row[key] = row[f"{key}_min"] = row[f"{key}_max"] = float("nan")
    row["extra"] = {}
    for name in extra_diffs:
        entry = {"config": suites.config_name(extras[name]), "us": median(samples[name]),
                 "diff": extra_diffs[name],
                 "vs_dgemm": median(paired_ratios(samples, name, "dgemm"))}
        if "deepgemm" in samples:
            entry["vs_deepgemm"] = median(paired_ratios(samples, name, "deepgemm"))
        if "cublas" in samples:
            entry["vs_cublas"] = median(paired_ratios(samples, name, "cublas"))
        row["extra"][name] = entry
    return row


def sweep_specs(spec, m, block_ns=None, multicasts=(1,)):
    """Legal (block_m, block_n, multicast) variants of `spec` for an M-row problem, each at the
    heuristic's pipeline depth for its tile; clusters share the operand the heuristic would."""
    from dgemm.kernels import hopper_fp8

    candidates = []
    for block_m in (64, 128) if m <= 128 else (128, 192):
        legal = hopper_fp8.block_ns(block_m)
        for block_n in [n for n in block_ns or () if n in legal] or legal:
            if not hopper_fp8.num_stages(block_m, block_n, spec.k):
                continue                  # no pipeline of this tile fits shared memory
            for multicast in multicasts:
                candidates.append(hopper_fp8.with_tile(
                    spec, block_m, block_n, num_tma_multicast=multicast,
                    multicast_on_a=multicast > 1 and hopper_fp8.shares_a(block_m, block_n)))
    return candidates


def precompile(shapes, opts: Options) -> None:
    """Compile every kernel the run will launch in parallel worker processes (the prewarm
    job's pool) so that hundreds of configs are not compiled one by one on one core."""
    from dgemm.jobs.prewarm import compile_all
    from dgemm.progress import Progress

    specs = []
    for shape in shapes:
        specs.append(spec_of(shape.m, shape.n, shape.k))
        specs += extra_specs(shape.m, shape.n, shape.k, opts).values()
        if opts.autotune:
            specs += autotuning.candidate_specs("fp8_gemm_nt", shape.m, shape.n, shape.k)
    specs = list(dict.fromkeys(specs))
    outcomes = compile_all(specs, os.cpu_count() or 1, Progress("precompile", len(specs), enabled=False))
    failed = [o for o in outcomes if o["status"] == "failed"]
    print(f"precompiled {len(specs)} kernels ({len(failed)} failed)", flush=True)
    for outcome in failed[:3]:
        print(outcome.get("error", "")[:500], file=sys.stderr)


def _fmt(value, spec=".2f") -> str:
    return "   nan" if value != value else format(value, spec)


def print_table(rows, title: str, picks_given: bool = False):
    print(f"\n{title}")
    header = (f"{'M':>5} {'N':>6} {'K':>6} | {'dgemm':>6} {'cuBLAS':>6} {'DeepGEMM':>8} | "
              f"{'/cuBLAS':>7} {'/DeepGEMM [rounds]':>18} | {'us dgemm':>9} | {'diff':>7} | "
              f"{'config':<16} part")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['m']:>5} {r['n']:>6} {r['k']:>6} | {r['dgemm_tflops']:>6.0f} "
              f"{_fmt(r['cublas_tflops'], '6.0f')} {_fmt(r['deepgemm_tflops'], '8.0f')} | "
              f"{_fmt(r['ratio'], '7.2f')} {_fmt(r['deepgemm_ratio'], '6.3f')} "
              f"[{_fmt(r['deepgemm_ratio_min'])}..{_fmt(r['deepgemm_ratio_max'])}] | "
              f"{r['dgemm_us']:>9.1f} | {r['diff']:.1e} | {r['config']:<16} {r['part']}")
        for line in report.alternatives_lines(r, 6):
            print(line)
    if any("call_us" in key for key in rows[0]):
        print("per-call us (dgemm / cuBLAS-blk): " + ", ".join(
            f"{r['dgemm_call_us']:.1f}/{_fmt(r['cublas_call_us'], '.1f')}" for r in rows))
    summarize(rows, picks_given)


def summarize(rows, picks_given: bool = False) -> dict:
    """Geomeans per part: dgemm / cuBLAS-blk, dgemm / DeepGEMM, the --picks checkout's picks /
    DeepGEMM (where given), and the best config timed for each shape / DeepGEMM."""
    summary = {}
    parts = sorted({r["part"] for r in rows}) + (["all"] if len({r["part"] for r in rows}) > 1 else [])
    for part in parts:
        chosen = [r for r in rows if part in ("all", r["part"])]
        line = {"shapes": len(chosen)}
        cublas = [r["ratio"] for r in chosen if r["ratio"] == r["ratio"]]
        if cublas:
            line["cublas"], line["cublas_min"] = geomean(cublas), min(cublas)
        deep = [r for r in chosen if r["deepgemm_ratio"] == r["deepgemm_ratio"]]
        if deep:
            ratios = [r["deepgemm_ratio"] for r in deep]
            line["deepgemm"], line["deepgemm_min"] = geomean(ratios), min(ratios)
            worst = min(deep, key=lambda r: r["deepgemm_ratio"])
            line["deepgemm_worst"] = f"{worst['m']}x{worst['n']}x{worst['k']}"
            line["below_0.95"] = sum(v < 0.95 for v in ratios)
            if picks_given:         # the --picks checkout's heuristic; same pick, same time
                line["picks_deepgemm"] = geomean(
                    [r["extra"]["picks"]["vs_deepgemm"] if "picks" in r["extra"]
                     else r["deepgemm_ratio"] for r in deep])
            best = [max([r["deepgemm_ratio"]] + [e.get("vs_deepgemm", 0) for e in r["extra"].values()])
                    for r in deep]
            line["best_timed_deepgemm"] = geomean(best)
        summary[part] = line
        print(f"[{part}] {line['shapes']} shapes: "
              + "  ".join(f"{key} {value:.3f}" if isinstance(value, float) else f"{key} {value}"
                          for key, value in line.items() if key != "shapes"))
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=suites.SUITES, default="deepseek_v3")
    parser.add_argument("--part", choices=suites.PARTS, default="all",
                        help="fit, holdout or all shapes of the suite (bench/suite.py)")
    parser.add_argument("--shapes", type=pathlib.Path,
                        help="another manifest's dense shapes (every m with every nk) instead")
    parser.add_argument("--extra", action="append", default=[],
                        help="extra shape M,N,K (repeatable)")
    parser.add_argument("--rounds", type=int, help="alternating rounds (default 5; broad: 3)")
    parser.add_argument("--iters", type=int, help="L2-flushed calls per round (20; broad: 10)")
    parser.add_argument("--candidates", type=int, default=0,
                        help="also time the cost model's next N picks for each shape")
    parser.add_argument("--picks", type=pathlib.Path,
                        help="JSON of another checkout's picks (python -m bench.suite picks); "
                             "each that differs is timed in the same rounds")
    parser.add_argument("--sweep", action="store_true",
                        help="also time other tile configs for each shape")
    parser.add_argument("--sweep-block-n", default="",
                        help="comma-separated block_n values for --sweep (default: all legal)")
    parser.add_argument("--sweep-multicast", default="1",
                        help="comma-separated cluster sizes for --sweep (1 and/or 2)")
    parser.add_argument("--only", default="", help="comma-separated row indices to run")
    add_run_arguments(parser, "shape")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_gemm: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    broad = args.suite != "deepseek_v3"
    opts = Options(rounds=args.rounds or (3 if broad else 5), iters=args.iters or (10 if broad else 20),
                   bf16=not broad, call_time=not broad, candidates=args.candidates,
                   picks=json.loads(args.picks.read_text()) if args.picks else {},
                   sweep=args.sweep,
                   block_ns=tuple(int(v) for v in args.sweep_block_n.split(",") if v),
                   multicasts=tuple(int(v) for v in args.sweep_multicast.split(",") if v),
                   skip=tuple(c for c in args.skip_configs.split(",") if c),
                   autotune=args.autotune)
    if args.autotune:
        autotuning.enable()
    timing.ROTATE_ORDER = not args.fixed_order
    if args.shapes:
        shapes = [suites.DenseShape(m, n, k) for m, n, k in dense_shapes(load_shapes(args.shapes))]
    else:
        shapes = suites.dense_shapes(args.suite, args.part)
    shapes += [suites.DenseShape(*(int(v) for v in s.split(","))) for s in args.extra]
    if args.only:
        shapes = [shapes[int(i)] for i in args.only.split(",")]
    rows, faults = [], []
    if args.resume and args.json and args.json.exists():
        previous = json.loads(args.json.read_text())
        rows, faults = previous["rows"], previous.get("faults", [])
    done = {(r["m"], r["n"], r["k"]) for r in rows} | {tuple(f["shape"]) for f in faults}
    shapes = [s for s in shapes if (s.m, s.n, s.k) not in done]
    precompile(shapes, opts)
    if args.precompile_only:
        return 0
    if args.autotune:
        autotuning.tune([("fp8_gemm_nt", s.m, s.n, s.k, 1) for s in shapes])
    if deep_gemm_module() is not None:
        warm_deep_gemm_reporting([("dense", s.m, s.n, s.k) for s in shapes])
    save = lambda: args.json and args.json.write_text(json.dumps(  # noqa: E731
        {"gpu": gpu_name(), "suite": args.suite, "part": args.part, "rows": rows,
         "faults": faults}, indent=1))
    for shape in shapes:
        try:
            rows.append(bench_shape(shape, opts))
        except Exception as exc:          # one broken shape must not cost the whole run
            print(f"  {shape.m}x{shape.n}x{shape.k}: FAILED {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''}", flush=True)
            if isinstance(exc, CudaFault) or is_cuda_fault(exc):
                # The CUDA context is gone: record the shape and let --resume go on.
                faults.append({"shape": [shape.m, shape.n, shape.k], "error": str(exc)[:500]})
                save()
                return 3
            continue
        r = rows[-1]
        print(f"  {shape.m}x{shape.n}x{shape.k} {r['config']}: dgemm {r['dgemm_tflops']:.0f} TFLOPS, "
              f"x cuBLAS-blk {_fmt(r['ratio'])}, x DeepGEMM {_fmt(r['deepgemm_ratio'], '.3f')}, "
              f"diff {r['diff']:.1e}", flush=True)
        save()
    if not rows:
        return 1
    for fault in faults:
        print(f"CUDA fault at {'x'.join(map(str, fault['shape']))}: {fault['error'][:300]}")
    print_table(rows, f"fp8_gemm_nt on {gpu_name()}, suite {args.suite}, part {args.part}, "
                      f"{opts.rounds} rounds x {opts.iters} calls"
                      + (", autotuned" if opts.autotune else ""), picks_given=bool(opts.picks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
