"""SM cycles of one launch per config under Nsight Compute, DeepGEMM's beside them: a measure of
a kernel change that the H200's power cap does not blur (compare_tiles times the same configs
in seconds, where the clock under load moves ratios by 1..3% from round to round).

    python -m bench.kernel_cycles --shape 4096,4096,7168 --config heuristic \
        --config 128x256x4/mc1 [--groups G] [--launches 3] [--metric NAME ...] [--json out.json]

Configs are compare_tiles' (BMxBN[xSTAGES][/mc2a|/mc2b|/ks2][@CSRC_DIR] or `heuristic`). The
command runs itself again under `ncu --clock-control none` (caches flushed before each profiled
launch, ncu's default) and reads `gpc__cycles_elapsed.max` of each launch of dgemm's and
DeepGEMM's kernels; per config the median over `--launches` launches, and its ratio to
DeepGEMM's (below 1: fewer cycles). `--metric` adds other ncu metrics (e.g.
dram__bytes_read.sum, lts__t_sector_hit_rate.pct, smsp__inst_executed.sum), each printed as its
median and its ratio to DeepGEMM's. Cycles are not time: a kernel that draws more power runs at
a lower clock, and memory latency costs more cycles at a higher one.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

import torch

from .compare_tiles import precompile, prepare

KERNELS = "regex:fp8_gemm_kernel|1d2d"      # dgemm's kernel, DeepGEMM's sm90 FP8 GEMM
METRIC = "gpc__cycles_elapsed.max"
_CHILD = "DGEMM_KERNEL_CYCLES_LABELS"        # set in the profiled run: where it lists launches


def _profiled_run(labels_path: pathlib.Path, args) -> None:
    """Under ncu: every implementation's kernel `args.launches` times, in an order written to
    `labels_path` (one label per launch that matches KERNELS)."""
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape]
    precompile(shapes, args.config, args.groups)
    labels = []
    for m, n, k in shapes:
        fns, rows, _ = prepare(m, n, k, args.config, args.groups)
        names = [name for name in fns if name != "cuBLAS-blk"]
        # prepare() ran each once (its calc_diff), in this order: profiled, not counted.
        labels += [{"shape": [m, n, k], "name": name, "warm": True} for name in names]
        for name in names:
            fn = fns[name]
            for _ in range(args.launches):
                fn()
                labels.append({"shape": [m, n, k], "name": name, "diff": rows[name]["diff"]})
        torch.cuda.synchronize()
    labels_path.write_text(json.dumps(labels))


def _shape(text: str) -> str:
    """argparse type: 'M,N,K' of positive integers (kept as text for the profiled run)."""
    parts = text.split(",")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected M,N,K, e.g. 4096,7168,2048")
    return text


def _ncu_rows(log: str, metrics=(METRIC,)) -> list:
    """(kernel name, {metric: value}) of each profiled launch, in launch order, from ncu's
    CSV (one row per launch and metric)."""
    start = log.find('"ID"')
    if start < 0:
        raise RuntimeError("kernel_cycles: ncu printed no results:\n" + log[-2000:])
    launches = {}
    for r in csv.DictReader(io.StringIO(log[start:])):
        if r.get("Metric Name") in metrics:
            name, values = launches.setdefault(int(r["ID"]), (r["Kernel Name"], {}))
            values[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    return [launches[i] for i in sorted(launches)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", required=True, type=_shape,
                        help="M,N,K (repeatable)")
    parser.add_argument("--config", action="append", required=True,
                        help="BMxBN[xSTAGES][/mc2a|/mc2b|/ks2][@CSRC_DIR] or 'heuristic'")
    parser.add_argument("--groups", type=int, default=0,
                        help="the contiguous MoE layout: G groups of M rows each")
    parser.add_argument("--launches", type=int, default=3, help="profiled launches per config")
    parser.add_argument("--metric", action="append", default=[],
                        help="another ncu metric to read beside the cycles (repeatable)")
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    metrics = [METRIC] + [m for m in args.metric if m != METRIC]
    if os.environ.get(_CHILD):
        _profiled_run(pathlib.Path(os.environ[_CHILD]), args)
        return 0
    if not torch.cuda.is_available():
        print("kernel_cycles: needs a CUDA GPU", file=sys.stderr)
        return 2
    ncu = shutil.which("ncu") or next(
        (str(p) for p in sorted(pathlib.Path("/usr/local").glob("cuda*/bin/ncu"))), None)
    if ncu is None:
        print("kernel_cycles: needs Nsight Compute (ncu) on the PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        labels_path, log_path = pathlib.Path(tmp, "labels.json"), pathlib.Path(tmp, "ncu.csv")
        cmd = [ncu, "--clock-control", "none", "--kernel-name", KERNELS,
               "--metrics", ",".join(metrics), "--csv", "--print-units", "base",
               "--log-file", str(log_path), sys.executable, "-m", "bench.kernel_cycles",
               *(argv if argv is not None else sys.argv[1:])]
        proc = subprocess.run(cmd, env=dict(os.environ, **{_CHILD: str(labels_path)}))
        if proc.returncode or not labels_path.exists():
            print(f"kernel_cycles: the profiled run failed (rc {proc.returncode})",
                  file=sys.stderr)
            return 1
        labels = json.loads(labels_path.read_text())
        try:
            launches = _ncu_rows(log_path.read_text(), metrics)
        except RuntimeError as err:
            print(err, file=sys.stderr)
            return 1
    # Launches pair with calls by order: each must be the implementation its label names.
    if len(launches) != len(labels) or any(
            ("1d2d" in kernel) != (label["name"] == "DeepGEMM")
            for label, (kernel, _) in zip(labels, launches)):
        print(f"kernel_cycles: the {len(launches)} profiled launches do not match the "
              f"{len(labels)} calls made (another kernel matched {KERNELS!r}?)",
              file=sys.stderr)
        return 1
    results = {}
    for label, (kernel, values) in zip(labels, launches):
        if label.get("warm"):
            continue
        key = (tuple(label["shape"]), label["name"])
        r = results.setdefault(key, {"kernel": kernel, "diff": label["diff"], "cycles": [],
                                     "metrics": {m: [] for m in metrics[1:]}})
        r["cycles"].append(values.get(METRIC, float("nan")))
        for m in metrics[1:]:
            r["metrics"][m].append(values.get(m, float("nan")))
    out = []
    for shape in dict.fromkeys(s for s, _ in results):
        print(f"\n{f'{args.groups} x ' if args.groups else ''}{'x'.join(map(str, shape))}")
        deep = results.get((shape, "DeepGEMM"))
        for (s, name), r in results.items():
            if s != shape:
                continue
            r["median"] = statistics.median(r["cycles"])
            ratio = r["median"] / statistics.median(deep["cycles"]) if deep else float("nan")
            print(f"  {name:<40} {r['median']:>12,.0f} cycles  x DeepGEMM {ratio:.3f}  "
                  f"[{min(r['cycles']):,.0f}..{max(r['cycles']):,.0f}]  diff {r['diff']:.1e}")
            r["metric_medians"] = {m: statistics.median(v) for m, v in r["metrics"].items()}
            for m, value in r["metric_medians"].items():
                base = statistics.median(deep["metrics"][m]) if deep else float("nan")
                print(f"      {m:<60} {value:>16,.2f}  x DeepGEMM {value / base:.3f}"
                      if base else f"      {m:<60} {value:>16,.2f}")
            out.append({"shape": list(shape), "name": name, **r, "vs_deepgemm": ratio})
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
