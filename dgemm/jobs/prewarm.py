"""`dgemm-cache prewarm`: compile every kernel a workload needs before it runs, without a GPU.

From a shape manifest (or a packaged preset) the job enumerates the problems, maps each to its
`KernelSpec` with the same heuristics a GPU rank uses, dedupes (one spec serves many M), keeps
this shard's share and hands each spec to `dgemm.jit.ensure_compiled` in a process pool. That
call walks the tiers, so a spec already on local disk or in Redis counts as cached (a rerun
resumes where the last one stopped) and a new one is published locally and, when
DGEMM_REMOTE_CACHE is set, to Redis. The workers die with this process, even when it is
SIGKILLed (Linux's parent-death signal, and a watchdog thread in each worker elsewhere), so an
interrupted job leaves no compile processes behind. With DGEMM_AUTOTUNE=1 the job also compiles
the kernels named by the autotuning decisions already published (on local disk or in Redis) for
the manifest's shape classes; `dgemm-cache tune` compiles what it times anyway. Exit status: 0 when every spec is cached
or compiled, 1 when any failed, 2 for bad arguments or a bad manifest.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import dataclasses
import json
import multiprocessing
import os
import signal
import sys
import threading
import time

from dgemm.kernels.spec import KernelSpec      # not dgemm.heuristics: that imports torch
from dgemm.jobs import manifest as manifests
from dgemm.progress import Progress

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifest", metavar="FILE",
                        help="shape manifest (JSON shaped like dgemm/shapes/deepseek_v3.json)")
    source.add_argument("--preset", choices=manifests.available_presets(),
                        help="a packaged shape manifest")
    parser.add_argument("--m-range", type=_m_range, default=[], metavar="LIST",
                        help="extra M values for the dense shapes, e.g. '1-256,512,1024-8192:1024'")
    parser.add_argument("--contiguous-spread", type=float, default=0.3, metavar="S",
                        help="rows per group of a contiguous grouped GEMM vary in "
                             "m_per_group * [1-S, 1+S]; prewarm every total M that reaches "
                             "(default 0.3; 0 for the nominal M only)")
    parser.add_argument("--arch", default="sm_90a", help="target architecture (default sm_90a)")
    parser.add_argument("--num-sms", type=_positive_int, default=132, metavar="N",
                        help="SM count of the GPUs that will run the kernels (default 132)")
    parser.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                        help="parallel compile processes (default: the CPUs this process may "
                             "use, divided among torchrun's LOCAL_WORLD_SIZE ranks)")
    parser.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                        help="compile only shard I of N (0-based); default from torchrun's "
                             "RANK/WORLD_SIZE, else 0/1")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prewarm", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    try:
        shard = args.shard or shard_from_env(os.environ)
        source = f"preset {args.preset}" if args.preset else f"manifest {args.manifest}"
        manifest = (manifests.load_preset(args.preset) if args.preset
                    else manifests.load_manifest(args.manifest))
        problem_list = manifests.problems(manifest, args.m_range, args.contiguous_spread)
        served = manifests.specs_for(problem_list, args.num_sms, args.arch)
        if _autotune_is_set():
            # The kernels of published decisions too, so nodes that autotune find them ready.
            for spec, problems in manifests.decided_specs_for(
                    problem_list, args.num_sms, args.arch).items():
                served.setdefault(spec, []).extend(problems)
        disable_jit = _disable_jit_is_set()
    except ValueError as exc:       # ManifestError, or a malformed DGEMM_* variable
        print(f"prewarm: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if disable_jit:
        print("prewarm: DGEMM_DISABLE_JIT is set, which forbids the compiles this job exists "
              "to do; unset it for the prewarm job (keep it on the trainer nodes)",
              file=sys.stderr)
        return EXIT_USAGE

    index, count = shard
    mine = list(served)[index::count]
    args.jobs = args.jobs or default_jobs(os.environ)
    started = time.monotonic()
    progress = Progress("prewarm", len(mine), enabled=not args.no_progress)
    outcomes = compile_all(mine, args.jobs, progress)
    progress.close()

    report = build_report(args, source, shard, problem_list, served, outcomes,
                          wall_seconds=time.monotonic() - started)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return EXIT_FAILED if report["failed"] else EXIT_OK


def build_report(args: argparse.Namespace, source: str, shard: tuple[int, int],
                 problem_list: list, served: dict, outcomes: list[dict],
                 wall_seconds: float) -> dict:
    kernels = []
    for outcome in sorted(outcomes, key=lambda o: o["spec"].to_json()):
        kernels.append(dict(outcome, spec=json.loads(outcome["spec"].to_json()),
                            problems=[dataclasses.asdict(p) for p in served[outcome["spec"]]]))
    return {
        "source": source, "arch": args.arch, "num_sms": args.num_sms,
        "shard": list(shard), "problems": len(problem_list),
        "specs_total": len(served), "specs_in_shard": len(outcomes),
        "compiled": _count(outcomes, "compiled"),
        "already_cached": _count(outcomes, "cached") + _count(outcomes, "downloaded"),
        "downloaded": _count(outcomes, "downloaded"),
        "failed": _count(outcomes, "failed"),
        "wall_seconds": round(wall_seconds, 3),
        "compile_seconds": round(sum(o["compile_seconds"] for o in outcomes), 3),
        "jobs": args.jobs, "cache_dir": _cache_dir(), "remote": _remote_for_display(),
        "kernels": kernels,
    }


def shard_from_env(environ) -> tuple[int, int]:
    """torchrun's RANK/WORLD_SIZE as a shard, so each rank of a prewarm job takes its share."""
    if "RANK" not in environ and "WORLD_SIZE" not in environ:
        return (0, 1)
    text = f"{environ.get('RANK', '0')}/{environ.get('WORLD_SIZE', '1')}"
    try:
        return _shard(text)
    except argparse.ArgumentTypeError as exc:
        raise manifests.ManifestError(f"RANK/WORLD_SIZE from the environment: {exc}") from exc


# ------------------------------------------------------------------------------------------
# Compiling
# ------------------------------------------------------------------------------------------
def compile_all(specs: list[KernelSpec], jobs: int, progress: Progress) -> list[dict]:
    """One outcome dict per spec (status compiled | cached | downloaded | failed), in the order
    the specs finish. Even one job uses a worker process: a compiler crash then costs one
    outcome instead of the report, and this process keeps no kernels in memory."""
    outcomes = []
    tally = {"compiled": 0, "cached": 0, "downloaded": 0, "failed": 0}

    def record(outcome: dict) -> None:
        outcomes.append(outcome)
        tally[outcome["status"]] += 1
        progress.advance(" ".join(f"{name} {n}" for name, n in tally.items()))

    if not specs:
        return outcomes
    # spawn, not fork: a worker must not inherit this process's Redis sockets, locks or
    # half-initialised CUDA state; it imports dgemm afresh and reads the same environment.
    context = multiprocessing.get_context("spawn")
    workers = min(jobs, len(specs))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context,
                                                initializer=die_with_parent,
                                                initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(prewarm_one, spec): spec for spec in specs}
        for future in concurrent.futures.as_completed(futures):
            try:
                record(future.result())
            except Exception as exc:          # the worker process itself died (e.g. a crash)
                record(_outcome(futures[future], "failed", 0.0, 0.0,
                                error=f"worker process failed: {type(exc).__name__}: {exc}"))
    return outcomes


_PR_SET_PDEATHSIG = 1            # <linux/prctl.h>
_PARENT_POLL_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """Pool worker initializer: end this worker when the job process `parent_pid` ends, however
    it ends. A worker holds hundreds of MB; a SIGKILLed job must not leave it waiting forever
    for work. On Linux the kernel sends SIGKILL when the parent goes (PR_SET_PDEATHSIG); a
    daemon thread that sees this process re-parented covers other systems and a failed prctl.
    (The signal follows the *thread* that started the worker: `compile_all` starts, uses and
    joins the pool in one thread, so it outlives every worker.)"""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass                    # the watchdog below still covers it
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True,
                     name="dgemm-prewarm-parent-watch").start()


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_PARENT_POLL_S)
    os._exit(1)


def prewarm_one(spec: KernelSpec) -> dict:
    """Ensure one spec is in the cache; runs in a pool worker. Never raises: a failure becomes
    an outcome, so one bad kernel cannot take the rest of the job down."""
    from dgemm import jit          # imported here so `--help` and manifest errors stay fast

    started = time.perf_counter()
    try:
        outcome = jit.ensure_compiled_outcome(spec)
    except Exception as exc:
        message, log = f"{type(exc).__name__}: {exc}", getattr(exc, "log", "")
        if log and log not in message:
            message += "\n" + log
        return _outcome(spec, "failed", time.perf_counter() - started, 0.0, error=message)
    return _outcome(spec, _STATUS[outcome.source], time.perf_counter() - started,
                    outcome.compile_seconds, key=outcome.key)


# Where the walk found the kernel -> the status this report gives it.
_STATUS = {"compiled": "compiled", "remote": "downloaded", "disk": "cached", "memory": "cached"}


def _outcome(spec: KernelSpec, status: str, seconds: float, compile_seconds: float,
             key: str | None = None, error: str | None = None) -> dict:
    return {"spec": spec, "key": key, "status": status, "seconds": round(seconds, 3),
            "compile_seconds": round(compile_seconds, 3), "error": error}


def _count(outcomes: list[dict], status: str) -> int:
    return sum(1 for o in outcomes if o["status"] == status)


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------
def format_report(report: dict) -> str:
    index, count = report["shard"]
    lines = [
        f"dgemm prewarm: {report['source']}, {report['arch']}, {report['num_sms']} SMs, "
        f"shard {index}/{count}",
        f"  problems          {report['problems']:>6}  (shapes x M values)",
        f"  specs total       {report['specs_total']:>6}  (this shard: {report['specs_in_shard']})",
        f"  compiled          {report['compiled']:>6}",
        f"  already cached    {report['already_cached']:>6}  "
        f"({report['downloaded']} downloaded from the remote tier)",
        f"  failed            {report['failed']:>6}",
        f"  wall time         {report['wall_seconds']:>8.1f} s with {report['jobs']} jobs",
        f"  compile time      {report['compile_seconds']:>8.1f} s summed over kernels",
        f"  local cache       {report['cache_dir']}",
        f"  remote cache      {report['remote'] or 'off (DGEMM_REMOTE_CACHE unset)'}",
    ]
    if report["kernels"]:
        lines.append("")
        lines.append(f"  {'status':<10} {'compile s':>9}  {'key':<12}  spec")
        for kernel in sorted(report["kernels"], key=lambda k: -k["compile_seconds"]):
            lines.append(f"  {kernel['status']:<10} {kernel['compile_seconds']:>9.2f}  "
                         f"{(kernel['key'] or '-')[:12]:<12}  {_describe(kernel)}")
    failures = [k for k in report["kernels"] if k["error"]]
    for kernel in failures:
        lines.append("")
        lines.append(f"  FAILED {_describe(kernel)}:")
        error_lines = kernel["error"].splitlines()
        lines.extend("    " + line for line in error_lines[:30])
        if len(error_lines) > 30:
            lines.append(f"    ... {len(error_lines) - 30} more lines (see --json)")
    return "\n".join(lines)


def _describe(kernel: dict) -> str:
    spec = kernel["spec"]
    ms = sorted({p["m"] for p in kernel["problems"]})
    return (f"{spec['kernel']} {spec['gemm_type']} n={spec['n']} k={spec['k']} "
            f"groups={spec['num_groups']} tile {spec['block_m']}x{spec['block_n']}x"
            f"{spec['block_k']} stages={spec['num_stages']} "
            f"multicast={spec['num_tma_multicast']} (M {', '.join(map(str, ms))})")


def _cache_dir() -> str:
    from dgemm.jit import env
    return str(env.cache_dir())


def _remote_for_display() -> str | None:
    """The remote URL without its password, which must not end up in logs."""
    from cache_service.client import redact
    from dgemm.jit import env
    url = env.get_str("DGEMM_REMOTE_CACHE")     # as set: a malformed one is in the failures
    return None if url is None else redact(url)


def _autotune_is_set() -> bool:
    from dgemm.jit import env
    return env.autotune()


def _disable_jit_is_set() -> bool:
    from dgemm.jit import env
    return env.disable_jit()


# ------------------------------------------------------------------------------------------
# Argument types
# ------------------------------------------------------------------------------------------
def _m_range(text: str) -> list[int]:
    try:
        return manifests.parse_m_range(text)
    except manifests.ManifestError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def default_jobs(environ) -> int:
    """The CPUs this process may use (the affinity mask, not os.cpu_count(): a container or a
    taskset may allow fewer than the host has), shared among the prewarm ranks of this node."""
    if hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0))
    else:
        cpus = os.cpu_count() or 1
    try:
        local_ranks = max(1, int(environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local_ranks = 1
    return max(1, cpus // local_ranks)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}")
    return value


def _shard(text: str) -> tuple[int, int]:
    index, slash, count = text.partition("/")
    try:
        shard = (int(index), int(count))
    except ValueError:
        shard = (-1, 0)
    if not slash or not 0 <= shard[0] < shard[1]:
        raise argparse.ArgumentTypeError(f"expected I/N with 0 <= I < N (e.g. 0/4); got {text!r}")
    return shard
