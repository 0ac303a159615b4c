"""Markdown tables of a benchmark run from the benches' --json files (plain or .gz), for
bench/RESULTS.md: one row per shape with dgemm / DeepGEMM and dgemm / cuBLAS-blk, then the
geomeans per part of the suite (bench/suite.py: fit, holdout).

    python -m bench.report dense bench/results/issue12/call4_v24_final/dense_ds.json.gz
    python -m bench.report grouped bench/results/issue12/call4_v24_final/grouped_broad.json.gz \
        --part holdout
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import pathlib
import sys


def load(path: pathlib.Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def geomean(values) -> float:
    values = [v for v in values if v == v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def _f(value, spec=".3f") -> str:
    return "–" if value != value else format(value, spec)


def summary(ratios: list, label: str) -> str:
    ratios = [r for r in ratios if r == r]
    if not ratios:
        return f"{label}: –"
    return (f"{label}: geomean **{geomean(ratios):.3f}** (min {min(ratios):.3f}, "
            f"{sum(r < 0.95 for r in ratios)} of {len(ratios)} below 0.95)")


def alternatives_lines(row: dict, most: int) -> list:
    """The lines a bench prints under a shape's row: the `--picks` config timed beside the
    heuristic's, and up to `most` other configs (`--candidates`), fastest first."""
    lines = []
    if "picks" in row["extra"]:
        picks = row["extra"]["picks"]
        lines.append(f"{'':>20}   --picks {picks['config']}: x DeepGEMM "
                     f"{_f(picks.get('vs_deepgemm', float('nan')))}, heuristic / picks "
                     f"{1 / picks['vs_dgemm']:.3f}")
    others = sorted(((name, e) for name, e in row["extra"].items() if name != "picks"),
                    key=lambda item: item[1]["us"])[:most]
    if others:
        lines.append("      others (x dgemm's pick): " + ", ".join(
            f"{name}={e['vs_dgemm']:.3f}" for name, e in others))
    return lines


def dense(run: dict) -> str:
    lines = ["| M | N | K | part | tile | dgemm TFLOPS | DeepGEMM | cuBLAS-blk | dgemm / DeepGEMM | "
             "dgemm / cuBLAS-blk | calc_diff |", "|" + "---|" * 11]
    for r in run["rows"]:
        lines.append(f"| {r['m']} | {r['n']} | {r['k']} | {r['part']} | {r['config']} | "
                     f"{r['dgemm_tflops']:.0f} | {_f(r['deepgemm_tflops'], '.0f')} | "
                     f"{_f(r['cublas_tflops'], '.0f')} | {_f(r['deepgemm_ratio'])} | "
                     f"{_f(r['ratio'], '.2f')} | {r['diff']:.1e} |")
    lines.append("")
    parts = sorted({r["part"] for r in run["rows"]})
    for part in parts + (["all"] if len(parts) > 1 else []):
        rows = [r for r in run["rows"] if part in ("all", r["part"])]
        lines.append(f"- {part} ({len(rows)} shapes): "
                     + summary([r["deepgemm_ratio"] for r in rows], "dgemm / DeepGEMM") + "; "
                     + summary([r["ratio"] for r in rows], "dgemm / cuBLAS-blk"))
    return "\n".join(lines)


def grouped(run: dict) -> str:
    lines = ["| layout | G | m per group | valid M | N | K | part | tile | dgemm TFLOPS | "
             "DeepGEMM | dgemm / DeepGEMM | calc_diff |", "|" + "---|" * 12]
    for r in run["rows"]:
        lines.append(f"| {r['layout']} | {r['groups']} | {r['nominal_m']} | {r['valid_m']} | "
                     f"{r['n']} | {r['k']} | {r['part']} | {r['config']} | "
                     f"{r['dgemm_tflops']:.0f} | {_f(r['deepgemm_tflops'], '.0f')} | "
                     f"{_f(r['deepgemm_ratio'])} | {r['diff']:.1e} |")
    lines.append("")
    parts = sorted({r["part"] for r in run["rows"]})
    for layout in ("contiguous", "masked"):
        for part in parts + (["all"] if len(parts) > 1 else []):
            rows = [r for r in run["rows"] if r["layout"] == layout and part in ("all", r["part"])]
            if rows:
                lines.append(f"- {layout}, {part} ({len(rows)} shapes): "
                             + summary([r["deepgemm_ratio"] for r in rows], "dgemm / DeepGEMM"))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("dense", "grouped"))
    parser.add_argument("json", type=pathlib.Path)
    parser.add_argument("--part", choices=("fit", "holdout", "all"), default="all",
                        help="only the shapes of this part of the suite (bench/suite.py)")
    args = parser.parse_args(argv)
    try:
        run = load(args.json)
    except (OSError, ValueError) as error:
        print(f"bench.report: cannot read {args.json}: {error}", file=sys.stderr)
        return 2
    if args.part != "all":
        run = dict(run, rows=[r for r in run["rows"] if r["part"] == args.part])
    print((dense if args.kind == "dense" else grouped)(run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
