"""`dgemm-cache prewarm`: compile every kernel a workload needs before it runs, without a GPU.

From a shape manifest (or a packaged preset) the job enumerates the problems, maps each to its
`KernelSpec` with the same heuristics a GPU rank uses, dedupes (one spec serves many M), keeps
this shard's share and hands each spec to `dgemm.jit.ensure_compiled` in a process pool
(`compile_pool`). That call walks the tiers, so a spec already on local disk or in Redis counts
as cached (a rerun resumes where the last one stopped) and a new one is published locally and,
when DGEMM_REMOTE_CACHE is set, to Redis.

Before any work (`make_plan`), the settings, manifest, arch, compiler (NVRTC loadable, nvcc
found), csrc tree and cache directory are checked once: a problem is one message and exit 2,
not one failure per kernel. At the end, with a remote cache, the job makes sure Redis holds
every kernel of its shard (`remote_fill`) and exits 3 when it could not (down, wrong password,
full), so that nothing waiting on the job starts against an empty Redis; a rerun once Redis is
fixed compiles nothing and uploads what is missing. SIGINT or SIGTERM stops the job within a
second or so (workers and their compilers killed), prints the report of what finished, and
exits 128 + the signal. The report and -v's lines: `prewarm_report`.
With DGEMM_AUTOTUNE=1 the job also compiles the kernels named by the autotuning decisions
already published (on local disk or in Redis) for the manifest's shape classes; `dgemm-cache
tune` compiles what it times anyway.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
from typing import Optional

from dgemm.jobs import manifest as manifests
from dgemm.jobs import prewarm_report as reports
from dgemm.jobs import remote_fill
from dgemm.jobs.compile_pool import StopSignals, compile_all   # bench/ imports compile_all here
from dgemm.progress import Progress

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REMOTE = 0, 1, 2, 3

EXIT_STATUS_HELP = """exit status:
  0    every kernel of the shard is cached (and, with a remote cache, in Redis)
  1    some kernel failed to compile (its compiler log is in the report)
  2    bad arguments, manifest or DGEMM_* setting, no usable compiler, an unusable cache
       directory, or DGEMM_DISABLE_JIT set; nothing was compiled
  3    every kernel compiled, but the remote cache (DGEMM_REMOTE_CACHE) could not take them
       all: unreachable, a missing or wrong password, or writes refused (full); rerun once
       it is fixed, which compiles nothing and uploads what is missing
  130  stopped by SIGINT (Ctrl-C), 143 by SIGTERM, after printing the report of what finished
under torchrun (RANK/WORLD_SIZE set) every line prewarm prints starts with [rank I/N]."""


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------
def add_manifest_arguments(parser: argparse.ArgumentParser, spread_use: str) -> None:
    """The options that name the problems of a job (prewarm, tune): --manifest or --preset,
    --m-range and --contiguous-spread (`spread_use`: what the job does with the spread)."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifest", metavar="FILE",
                        help="shape manifest (JSON shaped like dgemm/shapes/deepseek_v3.json)")
    source.add_argument("--preset", choices=manifests.available_presets(),
                        help="a packaged shape manifest")
    parser.add_argument("--m-range", type=_m_range, default=[], metavar="LIST",
                        help="extra M values for the dense shapes, e.g. '1-256,512,1024-8192:1024'")
    parser.add_argument("--contiguous-spread", type=float, default=0.3, metavar="S",
                        help="rows per group of a contiguous grouped GEMM vary in "
                             f"m_per_group * [1-S, 1+S]; {spread_use} "
                             "(default 0.3; 0 for the nominal M only)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EXIT_STATUS_HELP
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_manifest_arguments(parser, "prewarm every total M that reaches")
    parser.add_argument("--arch", type=_arch, default="sm_90a",
                        help="target architecture of the GPUs that will run the kernels "
                             "(default sm_90a: H100, H200; sm_90 is refused unless --portable)")
    parser.add_argument("--portable", action="store_true",
                        help="prewarm the portable kernels (what DGEMM_FORCE_PORTABLE=1 runs on "
                             "Hopper) instead of the arch's own")
    parser.add_argument("--num-sms", type=positive_int, default=132, metavar="N",
                        help="SM count of the GPUs that will run the kernels (default 132)")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="parallel compile processes (default: the CPUs this process may "
                             "use, divided among torchrun's LOCAL_WORLD_SIZE ranks)")
    parser.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                        help="compile only shard I of N (0-based); default from torchrun's "
                             "RANK/WORLD_SIZE, else 0/1")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the kernels the manifest needs, the M they serve and whether "
                             "each is on local disk and in Redis; compile and write nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def main(argv: list[str] | None = None) -> int:
    """`scripts/prewarm.py` (for torchrun): the same job as `dgemm-cache prewarm`."""
    parser = argparse.ArgumentParser(prog="prewarm", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="a line per kernel: which tier answered, compile seconds, upload")
    add_arguments(parser)
    args = parser.parse_args(argv)
    from dgemm.jit import env
    for name in env.unknown_variables():
        print(f"prewarm: warning: {name} is not a dgemm setting (a typo?); ignored",
              file=sys.stderr)
    return run(args)


def run(args: argparse.Namespace) -> int:
    try:
        plan = make_plan(args)
    except ValueError as exc:       # ManifestError, ConfigError: the message says the fix
        print(f"prewarm: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:       # the compile phase below takes its signals itself
        print("prewarm: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    if args.dry_run:
        return dry_run(args, plan)
    verbose = getattr(args, "verbose", False)      # dgemm-cache's -v, or main()'s
    note = reports.printer(plan.prefix)
    on_outcome, on_remote = reports.kernel_steps(note, plan) if verbose else (None, None)
    jobs = args.jobs or default_jobs(os.environ)
    started = time.monotonic()
    progress = Progress(f"{plan.prefix}prewarm", len(plan.mine),
                        enabled=not (args.no_progress or verbose))
    with StopSignals() as stop, remote_fill.remote_log_quiet(not verbose):
        remote_down = remote_fill.probe(plan.settings)
        if remote_down:
            note(f"prewarm: warning: the remote cache (DGEMM_REMOTE_CACHE="
                 f"{reports.remote_for_display(plan.settings)}) is unavailable: "
                 f"{remote_down.rstrip('.')}. Compiling into the local cache only; the job "
                 f"will exit 3 unless the remote cache takes every kernel by the end")
        outcomes = compile_all(plan.mine, jobs, progress, stop=stop.event,
                               on_outcome=on_outcome, verbose=verbose)
        progress.close()
        remote_status = None
        if plan.settings.remote is not None and not stop.event.is_set():
            remote_status = remote_fill.fill(outcomes, plan.settings, stop.event, on_remote)
    report = reports.build(plan, outcomes, remote_status, stop.signal_name, jobs,
                           wall_seconds=time.monotonic() - started)
    reports.output(report, args.json, plan.prefix)
    return exit_status(report, stop.signum)


def exit_status(report: dict, signum: Optional[int]) -> int:
    """128 + signal when interrupted; 1 when a kernel failed (a rerun will not fix it); 3 when
    every kernel is cached locally but the remote cache lacks some; else 0."""
    if signum is not None:
        return 128 + signum
    if report["failed"]:
        return EXIT_FAILED
    remote = report["remote_status"]
    if remote is not None and (remote["missing"] or remote["error"]):
        return EXIT_REMOTE
    return EXIT_OK


# ------------------------------------------------------------------------------------------
# The plan: everything worked out and checked before any work
# ------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Plan:
    source: str                     # "preset X" or "manifest FILE"
    arch: str
    num_sms: int
    shard: tuple                    # (index, count)
    prefix: str                     # of every line printed: "[rank I/N] " under torchrun
    problems: list
    served: dict                    # spec -> the problems it serves (every shard)
    mine: list                      # this shard's specs
    settings: object                # env.Settings, read once (and checked) here
    compiler: object                # the jit Compiler, known to be usable


def make_plan(args: argparse.Namespace) -> Plan:
    """Settings, shard, manifest, arch, specs, compiler, csrc tree and cache directory, each
    checked. ValueError (ManifestError, ConfigError) saying the fix."""
    from dgemm.jit import env
    from dgemm.jit.errors import ConfigError
    from dgemm.kernels import portable_fp8

    settings = env.validate()
    if settings.disable_jit and not args.dry_run:
        raise ConfigError("DGEMM_DISABLE_JIT is set, which forbids the compiles this job exists "
                          "to do; unset it for the prewarm job (keep it on the trainer nodes)")
    if args.arch == "sm_90" and not args.portable:
        raise ConfigError("--arch sm_90 selects only the portable kernels, which an H100 or "
                          "H200 runs only with DGEMM_FORCE_PORTABLE=1; did you mean --arch "
                          "sm_90a? (add --portable to prewarm the portable kernels on purpose)")
    shard = args.shard or shard_from_env(os.environ)
    index, count = shard
    under_torchrun = args.shard is None and "RANK" in os.environ and count > 1
    prefix = f"[rank {index}/{count}] " if under_torchrun else ""
    source = f"preset {args.preset}" if args.preset else f"manifest {args.manifest}"
    manifest = (manifests.load_preset(args.preset) if args.preset
                else manifests.load_manifest(args.manifest))
    problem_list = manifests.problems(manifest, args.m_range, args.contiguous_spread)
    family = portable_fp8.NAME if args.portable else None
    served = manifests.specs_for(problem_list, args.num_sms, args.arch, family=family)
    if env.autotune() and family is None:
        # The kernels of published decisions too, so nodes that autotune find them ready.
        for spec, problems in manifests.decided_specs_for(
                problem_list, args.num_sms, args.arch).items():
            served.setdefault(spec, []).extend(problems)
    compiler = check_toolchain(settings, next(iter(served)))
    check_cache_dir(settings, create=not args.dry_run)
    return Plan(source, args.arch, args.num_sms, shard, prefix, problem_list, served,
                list(served)[index::count], settings, compiler)


def check_toolchain(settings, spec):
    """The compiler the settings name, once: NVRTC loadable or nvcc found (with its version),
    and the csrc tree readable. ConfigError with the fix instead of one failure per kernel."""
    from dgemm.jit import compiler as compilers, source
    from dgemm.jit.errors import CompileError, ConfigError
    try:
        compiler = compilers.get_compiler(settings.compiler, settings.debug)
        compiler.identity       # loads NVRTC, or runs `nvcc --version`
        source.render(spec)     # the csrc tree (DGEMM_CSRC_DIR or the packaged one)
    except (CompileError, OSError) as error:
        raise ConfigError(f"cannot compile kernels here: {error}") from error
    return compiler


def check_cache_dir(settings, create: bool) -> None:
    """The local cache directory usable (created when `create`) and private; ConfigError."""
    from dgemm.jit.errors import CacheDirError, ConfigError
    from dgemm.jit.tiers import DiskTier
    disk = DiskTier(settings.cache_dir, settings.secret)
    try:
        disk.ensure_dirs() if create else disk.check_private()
    except CacheDirError as error:
        raise ConfigError(str(error)) from error


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
# Dry run
# ------------------------------------------------------------------------------------------
def dry_run(args: argparse.Namespace, plan: Plan) -> int:
    """List this shard's kernels with the M they serve, their keys and whether each is on the
    local disk and in Redis; compile and write nothing. Exit 3 when Redis cannot be asked."""
    from cache_service.errors import RemoteUnavailable
    from dgemm.jit import key as keys, source
    from dgemm.jit.tiers import DiskTier

    disk = DiskTier(plan.settings.cache_dir, plan.settings.secret)
    kernels = []
    for spec in plan.mine:
        key = keys.key(spec, plan.compiler, source.render(spec))
        kernels.append({"spec": json.loads(spec.to_json()), "key": key,
                        "m_values": manifests.format_m_values(p.m for p in plan.served[spec]),
                        "problems": len(plan.served[spec]),
                        "local": disk.entry_path(key).is_file(), "remote": None})
    remote_error = None
    if plan.settings.remote is not None:
        tier = remote_fill.fresh_tier(plan.settings)
        with remote_fill.remote_log_quiet(not getattr(args, "verbose", False)):
            try:
                found = remote_fill.present(tier, [k["key"] for k in kernels])
            except RemoteUnavailable as error:
                remote_error = remote_fill.reason(error, tier.cache)
            else:
                for kernel, there in zip(kernels, found):
                    kernel["remote"] = there
    reports.output(reports.build_dry_run(plan, kernels, remote_error), args.json, plan.prefix)
    return EXIT_REMOTE if remote_error else EXIT_OK


# ------------------------------------------------------------------------------------------
# Argument types
# ------------------------------------------------------------------------------------------
def _m_range(text: str) -> list[int]:
    try:
        return manifests.parse_m_range(text)
    except manifests.ManifestError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _arch(text: str) -> str:
    try:
        return manifests.check_arch(text, minimum=80)
    except ValueError as exc:
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


def positive_int(text: str) -> int:
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
