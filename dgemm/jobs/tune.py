"""`dgemm-cache tune`: make the autotuning decisions of a workload ahead of time, on one GPU node.

From a shape manifest (or a packaged preset), like prewarm, the job enumerates the problems,
maps each to its shape class (`dgemm.autotune.classes`: kind, N, K, groups, M bucket, this
GPU's arch and SM count), dedupes, and resolves each class with `dgemm.autotune.tune_class`:
a decision already on local disk or in Redis is kept, else the cost model's best
DGEMM_AUTOTUNE_TOP_K kernels are compiled (through the cache walk, so they land on disk and in
Redis like prewarm's) and timed on this GPU, and the fastest is published as the class's
decision. Trainer nodes with DGEMM_AUTOTUNE=1 then use the decisions without timing anything.
Run it on a GPU of the kind (and SM count) the workload runs on; two tune jobs at once are safe
(one of them times each class, as under torchrun).

Exit status: 0 when every class has a decision (or has a single candidate), 1 when some class
could not be decided (see the report), 2 for bad arguments, a bad manifest or
DGEMM_DISABLE_JIT set, 4 when this host has no CUDA GPU, or one whose kernels are not tuned
(autotuning covers the sm_90a kernel).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from dgemm.jobs import manifest as manifests
from dgemm.jobs.prewarm import positive_int, add_manifest_arguments, default_jobs
from dgemm.progress import Progress

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 4

# Tuned.source -> the status this report gives a class.
_STATUS = {"decided": "timed", "remote": "downloaded", "disk": "cached", "memory": "cached"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser, "tune every M bucket that reaches")
    parser.add_argument("--device", type=int, default=0, metavar="INDEX",
                        help="CUDA device to time on (default 0)")
    parser.add_argument("--num-sms", type=positive_int, default=None, metavar="N",
                        help="SM count the workload's ranks run with (default: the device's; "
                             "set it when they call dgemm.set_num_sms)")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="parallel processes compiling the candidates before they are "
                             "timed (default: the CPUs this process may use)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    try:
        source = f"preset {args.preset}" if args.preset else f"manifest {args.manifest}"
        manifest = (manifests.load_preset(args.preset) if args.preset
                    else manifests.load_manifest(args.manifest))
        problem_list = manifests.problems(manifest, args.m_range, args.contiguous_spread)
        from dgemm.jit import env
        env.autotune_top_k()            # a malformed DGEMM_AUTOTUNE_* fails here, as usage
        env.autotune_wait()
        disable_jit = env.disable_jit()
    except ValueError as exc:           # ManifestError, or a malformed DGEMM_* variable
        print(f"tune: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if disable_jit:
        print("tune: DGEMM_DISABLE_JIT is set, which forbids compiling the candidates this job "
              "times; unset it for the tune job", file=sys.stderr)
        return EXIT_USAGE
    device = _gpu(args.device)
    if isinstance(device, str):
        print(f"tune: {device}", file=sys.stderr)
        return EXIT_NO_GPU
    arch, num_sms = device
    num_sms = args.num_sms or num_sms

    from dgemm.autotune import shape_class, tune_class
    wanted = sorted({shape_class(p.kind, p.m, p.n, p.k, p.num_groups, num_sms, arch)
                     for p in problem_list})
    started = time.monotonic()
    published = _published(wanted)
    _compile_candidates([cls for cls in wanted if cls not in published],
                        args.jobs or default_jobs(os.environ), not args.no_progress)
    progress = Progress("tune", len(wanted), enabled=not args.no_progress)
    rows = []
    tally = {"timed": 0, "cached": 0, "downloaded": 0, "single": 0, "failed": 0}
    for cls in wanted:
        row = _row(tune_class(cls, args.device), published.get(cls))
        tally[row["status"]] += 1
        rows.append(row)
        progress.advance(" ".join(f"{name} {n}" for name, n in tally.items()))
    progress.close()
    import dgemm.jit
    report = {"source": source, "arch": arch, "num_sms": num_sms, "device": args.device,
              "problems": len(problem_list), "classes": len(wanted), **tally,
              "wall_seconds": round(time.monotonic() - started, 3),
              "stats": dgemm.jit.stats(), "decisions": rows}
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return EXIT_FAILED if tally["failed"] else EXIT_OK


def _gpu(index: int):
    """(arch, SM count) of CUDA device `index`, or a message saying why there is none."""
    try:
        import torch
    except ImportError as exc:
        return f"cannot import torch ({exc}); this job times kernels on a CUDA GPU"
    if not torch.cuda.is_available():
        return ("no CUDA GPU is visible to this process; run `dgemm-cache tune` on a GPU node "
                "of the kind the workload runs on (prewarm compiles without one)")
    if not 0 <= index < torch.cuda.device_count():
        return (f"--device {index} does not exist; this host has {torch.cuda.device_count()} "
                f"CUDA device(s)")
    from dgemm import utils
    from dgemm.kernels import hopper_fp8
    arch = utils.arch_for_capability(*torch.cuda.get_device_capability(index))
    if arch not in hopper_fp8.ARCHS:
        return (f"device {index} ({torch.cuda.get_device_name(index)}) is {arch}; autotuning "
                f"covers the {', '.join(hopper_fp8.ARCHS)} kernel, other GPUs run the "
                f"heuristic's")
    return arch, utils.get_num_sms_for(index)


def _published(wanted: list) -> dict:
    """{class: where its decision was found} for the classes that have one already (local
    disk or Redis), found before anything is compiled or timed."""
    from dgemm.autotune import tuner
    from dgemm.jit import decisions
    found = {}
    for cls in wanted:
        key = tuner.decision_key(cls)
        if key is not None:
            resolution = decisions.fetch(key)
            if resolution.found:
                found[cls] = resolution.source
    return found


def _compile_candidates(pending: list, jobs: int, show_progress: bool) -> None:
    """Compile the candidates of the classes still to be timed in parallel processes
    (prewarm's pool), so timing finds them in the cache instead of compiling one by one."""
    from dgemm.autotune import classes
    from dgemm.jit import env
    from dgemm.jobs.prewarm import compile_all
    specs = list(dict.fromkeys(spec for cls in pending
                               for spec in classes.candidates(cls, env.autotune_top_k())))
    progress = Progress("compile", len(specs), enabled=show_progress)
    compile_all(specs, jobs, progress)     # a failure shows again, per class, when timing
    progress.close()


def _row(tuned, found_before=None) -> dict:
    payload = tuned.payload or {}
    timings = payload.get("timings") if isinstance(payload.get("timings"), list) else []
    if tuned.key is None:
        status = "single"
    elif tuned.spec is None:
        status = "failed"
    else:
        status = _STATUS.get(found_before or tuned.source, tuned.source)
    return {"class": tuned.shape_class.describe(), "key": tuned.key, "status": status,
            "heuristic": _tile(tuned.heuristic),
            "chosen": _tile(tuned.spec) if tuned.spec is not None else None,
            "speedup": _speedup(timings, tuned.spec), "reason": tuned.reason or None}


def _speedup(timings: list, spec):
    """Heuristic's time / chosen kernel's time, from the decision's own timings."""
    try:
        heuristic = timings[0]["seconds"]
        best = min(t["seconds"] for t in timings if isinstance(t.get("seconds"), (int, float)))
        return round(heuristic / best, 3) if spec is not None and heuristic and best else None
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def _tile(spec) -> str:
    from dgemm.autotune.tuner import tile_name
    return tile_name(spec)


def format_report(report: dict) -> str:
    lines = [f"dgemm tune: {report['source']}, {report['arch']}, {report['num_sms']} SMs, "
             f"device {report['device']}",
             f"  problems {report['problems']}, shape classes {report['classes']}: "
             f"timed {report['timed']}, cached {report['cached']}, downloaded "
             f"{report['downloaded']}, one candidate {report['single']}, failed "
             f"{report['failed']}  ({report['wall_seconds']:.1f} s)", "",
             f"  {'status':<10} {'heuristic':>12} {'chosen':>12} {'speedup':>7}  class"]
    for row in report["decisions"]:
        speedup = f"{row['speedup']:.3f}" if row["speedup"] else "-"
        lines.append(f"  {row['status']:<10} {row['heuristic']:>12} {row['chosen'] or '-':>12} "
                     f"{speedup:>7}  {row['class']}")
        if row["reason"] and row["status"] == "failed":
            lines.append(f"      {row['reason']}")
    return "\n".join(lines)
