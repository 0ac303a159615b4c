"""MoE grouped FP8 GEMM benchmark (contiguous and masked layouts): dgemm vs DeepGEMM, same run.

    python -m bench.bench_grouped                          # the DeepSeek-V3 grouped shapes
    python -m bench.bench_grouped --suite broad [--part fit|holdout|all]
    python -m bench.bench_grouped --candidates 3           # also the cost model's next picks
    python -m bench.bench_grouped --picks old.json         # another checkout's picks beside
    python -m bench.bench_grouped --sweep 128x128,128x192/mc2b  # these tiles on every shape
    python -m bench.bench_grouped --dense-same-work        # our dense kernel on the same work

DeepGEMM (whenever `import deep_gemm` works, docs/benchmarks.md) runs in the same alternating
rounds as dgemm on the same inputs: the same fp8 data, the same pre-transformed (MN-major,
TMA-aligned) A scales, the same m_indices / masked_m. One row per shape with dgemm / DeepGEMM
(the median over rounds of the ratio within each round) and the geomean per layout and part of
the suite (bench/suite.py: "fit" shapes may be used to tune the heuristic, "holdout" shapes
judge it). TFLOPS count only valid rows. Rounds: 5 x 20 L2-flushed calls for the DeepSeek-V3
suite, 3 x 10 for the broad one.
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
from dgemm import heuristics

from . import autotuning, report, timing
from . import suite as suites
from .baselines import (deep_gemm_contiguous, deep_gemm_masked, deep_gemm_module,
                        warm_deep_gemm_reporting)
from .bench_gemm import diverse, spec_from_config
from .compare_tiles import parse_tile
from .inputs import calc_diff_rows, mn_major, random_contiguous, random_dense, random_masked
from .timing import (CudaFault, add_run_arguments, check_round_times, checked, geomean, gpu_name,
                     interleaved_samples, is_cuda_fault, kernel_time_us, median, paired_ratios)

KIND = {"contiguous": "m_grouped_fp8_gemm_nt_contiguous",
        "masked": "m_grouped_fp8_gemm_nt_masked"}


@dataclasses.dataclass
class Options:
    rounds: int = 5
    iters: int = 20
    candidates: int = 0
    picks: dict = dataclasses.field(default_factory=dict)
    control: bool = False             # --control: the pick timed twice
    tiles: tuple = ()                 # --sweep: (block_m, block_n, multicast, shares A) per shape
    dense_same_work: bool = False
    check_timing: bool = True      # compare the two ways of timing once, on the first shape
    skip: tuple = ()               # configs never timed beside the pick (e.g. known to fault)
    autotune: bool = False         # dgemm with DGEMM_AUTOTUNE=1 (classes tuned before timing)


@dataclasses.dataclass
class Problem:
    """One grouped call on the GPU: dgemm's and DeepGEMM's runs, and a check of an output."""
    case: suites.GroupedCase
    select_m: int                     # contiguous: padded rows; masked: expected_m
    run: object                       # dgemm's public call, writing `out`
    out: torch.Tensor
    launch: object                    # launch(spec, out): a given spec of dgemm's kernel
    deep: object                      # deep(out) -> callable, or None without DeepGEMM
    new_output: object                # a NaN-poisoned output tensor
    diff: object                      # diff(out): max calc_diff over the groups' valid rows


def setup_contiguous(case: suites.GroupedCase, deep_gemm) -> Problem:
    from dgemm.kernels import hopper_fp8

    data = random_contiguous(list(case.rows), case.n, case.k)
    a, b, m_indices = mn_major(data.a), data.b, data.m_indices
    new_output = lambda: torch.full((m_indices.numel(), case.n), float("nan"),  # noqa: E731
                                    device="cuda", dtype=torch.bfloat16)
    d = new_output()
    return Problem(
        case, m_indices.numel(),
        run=lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices), out=d,
        launch=lambda spec, out: hopper_fp8.launch(spec, a[0], a[1], b[0], b[1], out, m_indices),
        deep=(lambda out: deep_gemm_contiguous(deep_gemm, a, b, out, m_indices))
        if deep_gemm else None,
        new_output=new_output,
        diff=lambda out: max(calc_diff_rows(out, data.ref, m_indices == g)
                             for g in range(case.groups)))


def setup_masked(case: suites.GroupedCase, deep_gemm) -> Problem:
    from dgemm.kernels import hopper_fp8

    data = random_masked(list(case.rows), case.max_m, case.n, case.k)
    a, b, masked_m = mn_major(data.a), data.b, data.masked_m
    new_output = lambda: torch.full((case.groups, case.max_m, case.n), float("nan"),  # noqa: E731
                                    device="cuda", dtype=torch.bfloat16)
    d = new_output()
    return Problem(
        case, case.expected_m,
        run=lambda: dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, case.expected_m),
        out=d,
        launch=lambda spec, out: hopper_fp8.launch(spec, a[0], a[1], b[0], b[1], out, masked_m),
        deep=(lambda out: deep_gemm_masked(deep_gemm, a, b, out, masked_m, case.expected_m))
        if deep_gemm else None,
        new_output=new_output,
        diff=lambda out: max(calc_diff_rows(out[g], data.ref[g], data.valid[g])
                             for g in range(case.groups)))


def spec_of(case: suites.GroupedCase, select_m: int):
    return heuristics.select(KIND[case.layout], select_m, case.n, case.k, case.groups,
                             num_sms=dgemm.get_num_sms())


def select_m_of(case: suites.GroupedCase) -> int:
    return case.padded_m if case.layout == "contiguous" else case.expected_m


def extra_specs(case: suites.GroupedCase, opts: Options) -> dict:
    """{column: spec} timed beside the heuristic's pick: the `--picks` checkout's pick when it
    differs ("picks"), the cost model's next candidates, the `--sweep` tiles."""
    from dgemm.kernels import hopper_fp8

    m = select_m_of(case)
    spec = spec_of(case, m)
    extra = {}
    other = opts.picks.get(case.key())
    if other and other != suites.config_name(spec):
        extra["picks"] = spec_from_config(spec, other)
    if opts.candidates:
        ranked = heuristics.candidates(KIND[case.layout], m, case.n, case.k, case.groups,
                                       num_sms=dgemm.get_num_sms(), count=10 ** 6)
        for candidate in diverse(ranked, opts.candidates):
            extra[suites.config_name(candidate)] = candidate
    for block_m, block_n, multicast, on_a, k_split in opts.tiles:
        if k_split > 1:
            continue                       # K-split pairs run the plain GEMM only
        if case.layout == "contiguous" and 128 % block_m:
            continue                       # would straddle the 128-row group padding
        if case.layout == "masked" and multicast > 1 and not on_a:
            continue                       # masked clusters share A only
        if hopper_fp8.num_stages(block_m, block_n, case.k):
            tile = hopper_fp8.with_tile(spec, block_m, block_n, multicast, on_a)
            if tile != spec:
                extra.setdefault(suites.config_name(tile), tile)
    return {name: s for name, s in extra.items() if suites.config_name(s) not in opts.skip}


def bench_case(case: suites.GroupedCase, opts: Options, deep_gemm) -> dict:
    problem = (setup_contiguous if case.layout == "contiguous" else setup_masked)(case, deep_gemm)
    spec = heuristic = spec_of(case, problem.select_m)
    if opts.autotune:
        spec = autotuning.chosen_spec(KIND[case.layout], problem.select_m, case.n, case.k,
                                      case.groups)
    row = {"layout": case.layout, "groups": case.groups, "nominal_m": case.nominal_m,
           "valid_m": case.valid_m, "select_m": problem.select_m, "n": case.n, "k": case.k,
           "part": case.part, "label": case.label, "config": suites.config_name(spec)}
    checked(row["config"], problem.run)   # into a NaN-poisoned output
    row["diff"] = problem.diff(problem.out)
    timed = {"dgemm": problem.run}
    if problem.deep is not None:
        out_deep = problem.new_output()
        run_deep = problem.deep(out_deep)
        try:
            checked("deepgemm", run_deep)
            row["deepgemm_diff"] = problem.diff(out_deep)
            timed["deepgemm"] = run_deep
        except CudaFault:
            raise
        except RuntimeError as error:
            row["deepgemm_error"] = str(error).splitlines()[0]
    extras, extra_diffs = extra_specs(case, opts), {}
    if heuristic != spec:
        extras["heuristic"] = heuristic      # the decision's gain over the heuristic
    if opts.control:
        extras["control"] = spec             # the pick again, at another place in each round
    for name, other in extras.items():
        out_other = problem.new_output()
        checked(suites.config_name(other), lambda: problem.launch(other, out_other))
        extra_diffs[name] = problem.diff(out_other)
        timed[name] = lambda s=other, o=out_other: problem.launch(s, o)
    if opts.check_timing:
        print("  " + check_round_times(timed, opts.iters), flush=True)
        opts.check_timing = False
    samples = checked("timed rounds of " + ", ".join(timed),
                      lambda: interleaved_samples(timed, opts.rounds, opts.iters))
    flops = 2 * case.valid_m * case.n * case.k
    for name in ("dgemm", "deepgemm"):
        row[f"{name}_us"] = median(samples[name]) if name in samples else float("nan")
        row[f"{name}_tflops"] = flops / row[f"{name}_us"] / 1e6
    if "deepgemm" in samples:
        rounds = paired_ratios(samples, "dgemm", "deepgemm")
        row["deepgemm_ratio"], row["deepgemm_ratio_min"] = median(rounds), min(rounds)
    else:
        row["deepgemm_ratio"] = row["deepgemm_ratio_min"] = float("nan")
    row["extra"] = {}
    for name in extras:
        entry = {"config": suites.config_name(extras[name]), "us": median(samples[name]),
                 "diff": extra_diffs[name],
                 "vs_dgemm": median(paired_ratios(samples, name, "dgemm"))}
        if "deepgemm" in samples:
            entry["vs_deepgemm"] = median(paired_ratios(samples, name, "deepgemm"))
        row["extra"][name] = entry
    if opts.dense_same_work:
        row["dense_tflops"] = dense_tflops(case.valid_m, case.n, case.k)
    return row


def dense_tflops(m: int, n: int, k: int) -> float:
    """Our dense kernel on the grouped call's total work (M = valid rows), timed on its own."""
    data = random_dense(m, n, k)
    a = mn_major(data.a)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return 2 * m * n * k / kernel_time_us(lambda: dgemm.fp8_gemm_nt(a, data.b, d)) / 1e6


def precompile(cases, opts: Options) -> None:
    from dgemm.jobs.prewarm import compile_all
    from dgemm.progress import Progress

    specs = []
    for case in cases:
        specs.append(spec_of(case, select_m_of(case)))
        specs += extra_specs(case, opts).values()
        if opts.autotune:
            specs += autotuning.candidate_specs(KIND[case.layout], select_m_of(case), case.n,
                                                case.k, case.groups)
    specs = list(dict.fromkeys(specs))
    outcomes = compile_all(specs, os.cpu_count() or 1,
                           Progress("precompile", len(specs), enabled=False))
    failed = [o for o in outcomes if o["status"] == "failed"]
    print(f"precompiled {len(specs)} kernels ({len(failed)} failed)", flush=True)
    for outcome in failed[:3]:
        print(outcome.get("error", "")[:500], file=sys.stderr)


def deep_gemm_jobs(cases) -> list:
    return [("contiguous", c.rows, c.n, c.k) if c.layout == "contiguous" else
            ("masked", c.rows, c.max_m, c.expected_m, c.n, c.k) for c in cases]


def row_key(row: dict) -> str:
    return suites.grouped_key(row["layout"], row["groups"], row["nominal_m"], row["n"], row["k"])


def _fmt(value, spec=".3f") -> str:
    return "nan" if value != value else format(value, spec)


def print_table(rows, title: str, picks_given: bool) -> dict:
    print(f"\n{title}")
    header = (f"{'layout':<10} {'G':>3} {'m/grp':>5} {'valid M':>7} {'N':>6} {'K':>6} | "
              f"{'dgemm':>6} {'DeepGEMM':>8} | {'/DeepGEMM [low]':>15} | {'diff':>7} | "
              f"{'config':<15} part")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['layout']:<10} {r['groups']:>3} {r['nominal_m']:>5} {r['valid_m']:>7} "
              f"{r['n']:>6} {r['k']:>6} | {r['dgemm_tflops']:>6.0f} "
              f"{_fmt(r['deepgemm_tflops'], '8.0f')} | {_fmt(r['deepgemm_ratio'], '7.3f')} "
              f"[{_fmt(r['deepgemm_ratio_min'], '.2f')}] | {r['diff']:.1e} | "
              f"{r['config']:<15} {r['part']}")
        for line in report.alternatives_lines(r, 5):
            print(line)
        if "dense_tflops" in r:
            print(f"      dense kernel on the same work: {r['dense_tflops']:.0f} TFLOPS")
    summary = {}
    for layout in ("contiguous", "masked"):
        parts = sorted({r["part"] for r in rows if r["layout"] == layout})
        for part in parts + (["all"] if len(parts) > 1 else []):
            chosen = [r for r in rows if r["layout"] == layout and part in ("all", r["part"])
                      and r["deepgemm_ratio"] == r["deepgemm_ratio"]]
            if not chosen:
                continue
            ratios = [r["deepgemm_ratio"] for r in chosen]
            line = {"shapes": len(chosen), "deepgemm": geomean(ratios), "min": min(ratios),
                    "below_0.95": sum(v < 0.95 for v in ratios)}
            if picks_given:
                line["picks_deepgemm"] = geomean(
                    [r["extra"]["picks"]["vs_deepgemm"] if "picks" in r["extra"]
                     else r["deepgemm_ratio"] for r in chosen])
            line["best_timed_deepgemm"] = geomean(
                [max([r["deepgemm_ratio"]] + [e.get("vs_deepgemm", 0) for e in r["extra"].values()])
                 for r in chosen])
            summary[f"{layout}/{part}"] = line
            print(f"[{layout} {part}] {line['shapes']} shapes: geomean dgemm / DeepGEMM "
                  f"{line['deepgemm']:.3f}, min {line['min']:.3f}, below 0.95: "
                  f"{line['below_0.95']}"
                  + (f", --picks / DeepGEMM {line['picks_deepgemm']:.3f}" if picks_given else "")
                  + f", best timed / DeepGEMM {line['best_timed_deepgemm']:.3f}")
    print(f"max diff: {max(r['diff'] for r in rows):.1e}")
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=suites.SUITES, default="deepseek_v3")
    parser.add_argument("--part", choices=suites.PARTS, default="all")
    parser.add_argument("--layout", choices=("contiguous", "masked", "both"), default="both")
    parser.add_argument("--rounds", type=int, help="alternating rounds (default 5; broad: 3)")
    parser.add_argument("--iters", type=int, help="L2-flushed calls per round (20; broad: 10)")
    parser.add_argument("--candidates", type=int, default=0,
                        help="also time the cost model's next N picks for each shape")
    parser.add_argument("--picks", type=pathlib.Path,
                        help="JSON of another checkout's picks (python -m bench.suite picks)")
    parser.add_argument("--sweep", default="",
                        help="also time these tiles on every shape, e.g. 128x128,128x256,"
                             "128x192/mc2b (mc2a, mc2b: 2-CTA clusters sharing A, B)")
    parser.add_argument("--control", action="store_true",
                        help="also time dgemm's pick a second time (its own column, launched "
                             "like the other configs): the spread between the two is the "
                             "timing's own")
    parser.add_argument("--dense-same-work", action="store_true",
                        help="also time the dense kernel on each shape's valid rows")
    add_run_arguments(parser, "case")
    args = parser.parse_args(argv)
    try:
        sweep = tuple(parse_tile(t) for t in args.sweep.split(",") if t)
    except argparse.ArgumentTypeError as err:
        parser.error(f"--sweep: {err}")
    if not torch.cuda.is_available():
        print("bench_grouped: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    broad = args.suite != "deepseek_v3"
    opts = Options(rounds=args.rounds or (3 if broad else 5),
                   iters=args.iters or (10 if broad else 20), candidates=args.candidates,
                   picks=json.loads(args.picks.read_text()) if args.picks else {},
                   tiles=sweep,
                   dense_same_work=args.dense_same_work, control=args.control,
                   skip=tuple(c for c in args.skip_configs.split(",") if c),
                   autotune=args.autotune)
    if args.autotune:
        autotuning.enable()
    timing.ROTATE_ORDER = not args.fixed_order
    layouts = ("contiguous", "masked") if args.layout == "both" else (args.layout,)
    cases = [c for layout in layouts for c in suites.grouped_cases(args.suite, layout, args.part)]
    rows, faults = [], []
    if args.resume and args.json and args.json.exists():
        previous = json.loads(args.json.read_text())
        rows, faults = previous["rows"], previous.get("faults", [])
    done = {row_key(r) for r in rows} | {f["key"] for f in faults}
    cases = [c for c in cases if c.key() not in done]
    precompile(cases, opts)
    if args.precompile_only:
        return 0
    if args.autotune:
        autotuning.tune([(KIND[c.layout], select_m_of(c), c.n, c.k, c.groups) for c in cases])
    deep_gemm = deep_gemm_module()
    if deep_gemm is not None:
        warm_deep_gemm_reporting(deep_gemm_jobs(cases))
    save = lambda: args.json and args.json.write_text(json.dumps(  # noqa: E731
        {"gpu": gpu_name(), "suite": args.suite, "part": args.part, "rows": rows,
         "faults": faults}, indent=1))
    for case in cases:
        try:
            rows.append(bench_case(case, opts, deep_gemm))
        except Exception as exc:          # one broken shape must not cost the whole run
            print(f"  {case.key()}: FAILED {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''}", flush=True)
            if isinstance(exc, CudaFault) or is_cuda_fault(exc):
                # The CUDA context is gone: record the shape and let --resume go on.
                faults.append({"key": case.key(), "error": str(exc)[:500]})
                save()
                return 3
            continue
        r = rows[-1]
        print(f"  {case.key()} {r['config']}: dgemm {r['dgemm_tflops']:.0f} TFLOPS, x DeepGEMM "
              f"{_fmt(r['deepgemm_ratio'])}, diff {r['diff']:.1e}", flush=True)
        save()
    if not rows:
        return 1
    for fault in faults:
        print(f"CUDA fault at {fault['key']}: {fault['error'][:300]}")
    print_table(rows, f"grouped FP8 GEMMs on {gpu_name()}, suite {args.suite}, part {args.part}, "
                      f"{opts.rounds} rounds x {opts.iters} calls"
                      + (", autotuned" if opts.autotune else ""), bool(opts.picks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
