"""Weight-gradient GEMMs (recipe (1, 1, 128)) against DeepGEMM 54e2261 in the same run:
dense `fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))` and `k_grouped_fp8_gemm_nt_contiguous`
on DeepSeek-V3's training shapes (dgemm/shapes/deepseek_v3.json: "wgrad", "k_grouped"), or
with `--suite broad` on other models' layers and experts (dgemm/shapes/broad.json; one K per
layer, and a held-out part: bench/suite.py).

    python -m bench.bench_wgrad [--rounds 5] [--quick] [--json out.json] [--kinds wgrad,k_grouped]
        [--suite deepseek_v3|broad] [--part fit|holdout|all]
        [--tile 128x1|136x2b|...] [--stages S] [--time-wrong]

Both implementations get the same fp8 pairs with their scales already MN-major and
TMA-aligned (so neither times a layout copy), accumulate in place onto their own copy of the
same fp32 `c` (`d is c`, the training use), and both results are checked against an fp32
reference before anything is timed (calc_diff < 1e-3; a wrong dgemm row is not timed unless
--time-wrong asks for it, for ablated kernel copies, and is then marked; a wrong DeepGEMM row
loses its column). --tile and --stages force the Hopper tile (probes). DeepGEMM compiles its
kernels (N and K of a dense call are compile-time there) in parallel worker processes
first. TFLOPS count 2 * M * N * K (K = all groups' tokens for k-grouped). The last line
gives dgemm's cache counters: `compiles` 0 means every kernel came from the prewarmed cache.
First written in training t0 without a GPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import random

import torch

import dgemm
from bench import baselines, inputs, timing
from bench import suite as suites
from dgemm import utils
from dgemm.kernels import hopper_wgrad

WGRAD = (1, 1, 128)


def _quantized(rows: int, k: int):
    """fp8 [rows, k] with 1x128 scales (MN-major, TMA-aligned) and its dequantised value."""
    data, scales = dgemm.per_token_cast_to_fp8(torch.randn(rows, k, device="cuda",
                                                           dtype=torch.bfloat16))
    value = (data.float().view(rows, -1, 128) * scales.unsqueeze(-1)).view(rows, k)
    return (data, dgemm.get_mn_major_tma_aligned_tensor(scales)), value


def k_grouped_ks(groups: int, k_per_group: int, seed: int = 0) -> list:
    """Uneven tokens per expert: k_per_group * U(0.7, 1.3), rounded down to 128 (the same for
    the DeepGEMM warm-up job and the timed case)."""
    rng = random.Random(seed)
    return [int(k_per_group * rng.uniform(0.7, 1.3)) // 128 * 128 for _ in range(groups)]


def dense_case(m: int, n: int, k: int, deep_gemm) -> dict:
    a, a_value = _quantized(m, k)
    b, b_value = _quantized(n, k)
    c = torch.randn(m, n, device="cuda")
    expected = c + a_value @ b_value.t()
    del a_value, b_value
    d = c.clone()
    timing.checked("dgemm", lambda: dgemm.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD))
    case = {"flop": 2 * m * n * k, "diffs": {"dgemm": dgemm.calc_diff(d, expected)},
            "fns": {"dgemm": lambda: dgemm.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD)}}
    if deep_gemm is not None:
        dg_d = c.clone()
        try:
            deep_gemm.fp8_gemm_nt(a, b, dg_d, c=dg_d, recipe=WGRAD)
            torch.cuda.synchronize()
            case["diffs"]["deep_gemm"] = dgemm.calc_diff(dg_d, expected)
            case["fns"]["deep_gemm"] = lambda: deep_gemm.fp8_gemm_nt(a, b, dg_d, c=dg_d,
                                                                     recipe=WGRAD)
        except Exception as exc:            # DeepGEMM refusing a shape loses its column only
            case["deep_gemm_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return case


def k_grouped_case(groups: int, m: int, n: int, k_per_group: int, deep_gemm) -> dict:
    ks = k_grouped_ks(groups, k_per_group)
    parts = [(_quantized(m, k), _quantized(n, k)) for k in ks]
    a = (torch.cat([p[0][0][0].flatten() for p in parts]),
         dgemm.get_mn_major_tma_aligned_tensor(torch.cat([p[0][0][1] for p in parts], dim=1)))
    b = (torch.cat([p[1][0][0].flatten() for p in parts]),
         dgemm.get_mn_major_tma_aligned_tensor(torch.cat([p[1][0][1] for p in parts], dim=1)))
    c = torch.randn(groups, m, n, device="cuda")
    expected = torch.stack([c[g] + parts[g][0][1] @ parts[g][1][1].t() for g in range(groups)])
    del parts
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    d = c.clone()

    def diff(out):
        return max(dgemm.calc_diff(out[g], expected[g]) for g in range(groups))

    timing.checked("dgemm", lambda: dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout,
                                                                           c=d))
    case = {"flop": 2 * m * n * sum(ks), "ks": ks, "diffs": {"dgemm": diff(d)},
            "fns": {"dgemm": lambda: dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout,
                                                                            c=d)}}
    if deep_gemm is not None:
        dg_d = c.clone()
        try:
            deep_gemm.k_grouped_fp8_gemm_nt_contiguous(a, b, dg_d, ks, layout, c=dg_d)
            torch.cuda.synchronize()
            case["diffs"]["deep_gemm"] = diff(dg_d)
            case["fns"]["deep_gemm"] = lambda: deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
                a, b, dg_d, ks, layout, c=dg_d)
        except Exception as exc:
            case["deep_gemm_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return case


def deep_gemm_jobs(rows: list) -> list:
    return [("wgrad", *row.shape) if row.kind == "wgrad" else
            ("k_grouped", row.shape[1], row.shape[2],
             tuple(k_grouped_ks(row.shape[0], row.shape[3])))
            for row in rows]


def parse_tile(text: str) -> tuple:
    """'160x2a' -> (160, 2, True); '128x1' -> (128, 1, False)."""
    import re
    match = re.fullmatch(r"(\d+)x([12])([ab]?)", text)
    if not match or (match[2] == "2") != bool(match[3]):
        raise argparse.ArgumentTypeError(f"{text!r}: expected BLOCK_Nx1 or BLOCK_Nx2a / x2b "
                                         f"(clusters of 2 sharing A or B)")
    block_n = int(match[1])
    if block_n not in hopper_wgrad.BLOCK_NS:
        raise argparse.ArgumentTypeError(f"block_n {block_n}: one of {hopper_wgrad.BLOCK_NS}")
    return block_n, int(match[2]), match[3] == "a"


def force_tile(block_n: int, multicast: int, on_a: bool, stages: int = 0) -> None:
    """Every Hopper wgrad selection of this process returns that tile and cluster (and
    `stages` stages, if given: at most what fits)."""
    heuristic = hopper_wgrad.select

    def forced(*args, **kwargs):
        return dataclasses.replace(heuristic(*args, **kwargs), block_n=block_n,
                                   num_stages=min(stages or hopper_wgrad.MAX_STAGES,
                                                  hopper_wgrad.num_stages(block_n)),
                                   num_tma_multicast=multicast, multicast_on_a=on_a)
    hopper_wgrad.select = forced


def tile_name(kind: str, shape: tuple) -> str:
    """The Hopper wgrad tile this process runs for a row (forced or the heuristic's), as
    `--tile` spells it, with its stages: e.g. 120x1@5."""
    groups, m, n, k = (1, *shape) if kind == "wgrad" else shape
    num_sms = utils.get_num_sms_for(torch.cuda.current_device())
    spec = hopper_wgrad.select("normal", m, n, k, groups, num_sms)
    cluster = "1" if spec.num_tma_multicast == 1 else "2" + ("a" if spec.multicast_on_a else "b")
    return f"{spec.block_n}x{cluster}@{spec.num_stages}"


def check_stages(parser: argparse.ArgumentParser, stages: int, tile) -> None:
    """`--stages` (0: not given) forces a ring depth only with a forced tile, within
    2..MAX_STAGES; anything else ends in `parser.error`."""
    if stages and not tile:
        parser.error("--stages needs --tile")
    if stages and not 2 <= stages <= hopper_wgrad.MAX_STAGES:
        parser.error(f"--stages {stages}: between 2 and {hopper_wgrad.MAX_STAGES} (at "
                     f"most what fits the tile's shared memory is used)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="dense K = 4096 only, 2 rounds")
    parser.add_argument("--suite", choices=suites.SUITES, default="deepseek_v3",
                        help="deepseek_v3 (the issue's table) or broad (other models' layers "
                             "and experts, one K per layer: bench/suite.py)")
    parser.add_argument("--part", choices=suites.PARTS, default="all",
                        help="fit, holdout or all rows of the suite (bench/suite.py)")
    parser.add_argument("--kinds", default="wgrad,k_grouped",
                        help="comma-separated: wgrad (dense), k_grouped (default both)")
    parser.add_argument("--json", type=pathlib.Path,
                        help="write the rows here (rewritten after every shape)")
    parser.add_argument("--no-deep-gemm", action="store_true", help="time dgemm alone")
    parser.add_argument("--time-wrong", action="store_true",
                        help="time dgemm even where its result is wrong (ablation probes: a "
                             "kernel copy with a stage removed); the exit status stays 1")
    parser.add_argument("--tile", type=parse_tile, metavar="BLOCK_NxCLUSTER[a|b]",
                        help="force the Hopper wgrad tile, e.g. 160x2a (160 columns, clusters "
                             "of 2 sharing A), 128x1: a probe, not the heuristic")
    parser.add_argument("--stages", type=int, default=0,
                        help="with --tile: at most this many pipeline stages (a probe)")
    args = parser.parse_args(argv)
    check_stages(parser, args.stages, args.tile)
    if args.tile:
        force_tile(*args.tile, stages=args.stages)
    kinds = [kind for kind in args.kinds.split(",") if kind]
    unknown = sorted(set(kinds) - {"wgrad", "k_grouped"})
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; expected wgrad, k_grouped")
    rows = suites.wgrad_cases(args.suite, kinds, args.part, args.quick)
    rounds = 2 if args.quick else args.rounds
    deep_gemm = None if args.no_deep_gemm else baselines.deep_gemm_module()
    print(f"# {timing.gpu_name()}; DeepGEMM: {'yes' if deep_gemm else 'no'}; suite "
          f"{args.suite}, part {args.part}: {len(rows)} shapes, {rounds} rounds", flush=True)
    if deep_gemm is not None:
        errors = baselines.warm_deep_gemm(deep_gemm_jobs(rows))
        for error in errors:
            print(f"# DeepGEMM warm-up failed: {error}", flush=True)
    results, ratios = [], []

    def save():
        if args.json:
            args.json.write_text(json.dumps({"gpu": timing.gpu_name(), "rounds": rounds,
                                             "suite": args.suite, "part": args.part,
                                             "rows": results, "stats": dgemm.jit.stats()},
                                            indent=1))

    print(f"{'kind':10} {'shape':>28} {'diff':>9} {'DG diff':>9} {'dgemm TF':>9} {'DG TF':>8} "
          f"{'ratio':>6}", flush=True)
    for case_row in rows:
        kind, shape = case_row.kind, case_row.shape
        row = {"kind": kind, "shape": list(shape), "part": case_row.part,
               "label": case_row.label, "tile": tile_name(kind, shape)}
        results.append(row)
        try:
            case = (dense_case(*shape, deep_gemm) if kind == "wgrad"
                    else k_grouped_case(*shape, deep_gemm))
        except timing.CudaFault as fault:
            row["fault"] = str(fault)
            save()
            print(f"{kind:10} {str(shape):>28} CUDA FAULT: {fault}", flush=True)
            return 3
        row.update(diffs=case["diffs"], ks=case.get("ks"),
                   deep_gemm_error=case.get("deep_gemm_error"))
        diff = case["diffs"]["dgemm"]
        dg_diff = case["diffs"].get("deep_gemm", float("nan"))
        fns = dict(case["fns"])
        if not dg_diff < inputs.DIFF_BAR:
            fns.pop("deep_gemm", None)      # a wrong or missing DeepGEMM result is not timed
        if not diff < inputs.DIFF_BAR and not args.time_wrong:
            save()
            print(f"{kind:10} {str(shape):>28} {diff:9.2e} {dg_diff:9.2e} WRONG: not timed",
                  flush=True)
            continue
        samples = timing.interleaved_samples(fns, rounds=rounds)
        tflops = {name: case["flop"] / timing.median(us) / 1e6 for name, us in samples.items()}
        ratio = (timing.median(timing.paired_ratios(samples, "dgemm", "deep_gemm"))
                 if "deep_gemm" in samples else float("nan"))
        if ratio == ratio:
            ratios.append(ratio)
        row.update(us={name: timing.median(us) for name, us in samples.items()},
                   samples_us=samples, tflops=tflops, ratio=ratio if ratio == ratio else None)
        save()
        mark = "" if diff < inputs.DIFF_BAR else "  WRONG (timed: --time-wrong)"
        print(f"{kind:10} {str(shape):>28} {diff:9.2e} {dg_diff:9.2e} {tflops['dgemm']:9.1f} "
              f"{tflops.get('deep_gemm', float('nan')):8.1f} {ratio:6.3f}{mark}", flush=True)
    if ratios:
        wrong_timed = sum(1 for row in results if row.get("ratio") is not None
                          and not row["diffs"]["dgemm"] < inputs.DIFF_BAR)
        print(f"geomean dgemm / DeepGEMM speed: {timing.geomean(ratios):.3f}, "
              f"min {min(ratios):.3f} over {len(ratios)} shapes"
              + (f" ({wrong_timed} of them wrong results, timed)" if wrong_timed else ""))
        for part in suites.PARTS[:2]:
            in_part = [row["ratio"] for row in results
                       if row.get("ratio") is not None and row["part"] == part]
            if in_part and len(in_part) < len(ratios):
                print(f"  part {part}: geomean {timing.geomean(in_part):.3f}, min "
                      f"{min(in_part):.3f} over {len(in_part)} shapes")
    print(f"dgemm cache: {json.dumps(dgemm.jit.stats())}")
    save()
    wrong = [row for row in results if not row.get("diffs", {}).get("dgemm", 1) < inputs.DIFF_BAR]
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
