"""`dgemm-cache prewarm`: compile every kernel a workload needs before it runs, without a GPU.

From a shape manifest (or a packaged preset) the job enumerates the problems, maps each to its
`KernelSpec` with the same heuristics a GPU rank uses, dedupes (one spec serves many M), keeps
this shard's share and hands each spec to `dgemm.jit.ensure_compiled` in a process pool. That
call walks the tiers, so a spec already on local disk or in Redis counts as cached (a rerun
resumes where the last one stopped) and a new one is published locally and, when
DGEMM_REMOTE_CACHE is set, to Redis.

Before any work, every DGEMM_* variable, the compiler (NVRTC loadable, nvcc found), the csrc
tree and the cache directory are checked once: a problem is one message and exit 2, not one
failure per kernel. At the end, with DGEMM_REMOTE_CACHE set, every kernel of the shard is looked
up in Redis (one pipelined EXISTS per 256) and the ones it lacks are uploaded from the local
disk; the report says how many are there, and a remote that could not take them all (down,
wrong password, full) makes the job exit 3, so that nothing waiting on it starts against an
empty Redis. A rerun once Redis is fixed compiles nothing and uploads what is missing.

The workers die with this process, even when it is SIGKILLed (Linux's parent-death signal, and
a watchdog thread in each worker elsewhere). SIGINT (Ctrl-C) or SIGTERM stops the job within
about a second: pending kernels are cancelled, the workers are terminated mid-compile, and the
report of what finished is printed before the job exits 128 + the signal (130, 143).

Exit status: 0 when every spec is cached or compiled (and, with DGEMM_REMOTE_CACHE, in Redis),
1 when any kernel failed to compile, 2 for bad arguments, a bad manifest or setting, a missing
compiler or an unusable cache directory, 3 when every kernel compiled but the remote cache
could not be filled, 130/143 when interrupted by SIGINT/SIGTERM.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

from dgemm.kernels.spec import KernelSpec      # not dgemm.heuristics: that imports torch
from dgemm.jobs import manifest as manifests
from dgemm.progress import Progress

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REMOTE = 0, 1, 2, 3

_STOP_POLL_S = 0.2          # how often the job looks for a SIGINT/SIGTERM while kernels compile
_KILL_WAIT_S = 5.0          # longest wait for a SIGKILLed worker to be reaped
_BATCH = 256                # keys per pipelined EXISTS round trip


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
    parser.add_argument("--arch", type=_arch, default="sm_90a",
                        help="target architecture of the GPUs that will run the kernels "
                             "(default sm_90a: H100, H200)")
    parser.add_argument("--portable", action="store_true",
                        help="prewarm the portable kernels (what DGEMM_FORCE_PORTABLE=1 runs on "
                             "Hopper) instead of the arch's own")
    parser.add_argument("--num-sms", type=_positive_int, default=132, metavar="N",
                        help="SM count of the GPUs that will run the kernels (default 132)")
    parser.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                        help="parallel compile processes (default: the CPUs this process may "
                             "use, divided among torchrun's LOCAL_WORLD_SIZE ranks)")
    parser.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                        help="compile only shard I of N (0-based); default from torchrun's "
                             "RANK/WORLD_SIZE, else 0/1")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the kernels the manifest needs, the M they serve and where "
                             "each is cached; compile nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def main(argv: list[str] | None = None) -> int:
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
        return _run(args)
    except KeyboardInterrupt:       # outside the compile phase, which handles its own signals
        print("prewarm: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


@dataclasses.dataclass
class Plan:
    """What a run will do, worked out (and checked) before any compile."""
    source: str                     # "preset X" or "manifest FILE"
    shard: tuple                    # (index, count)
    shard_from_env: bool            # taken from torchrun's RANK/WORLD_SIZE
    problems: list
    served: dict                    # spec -> the problems it serves (every shard)
    mine: list                      # this shard's specs
    settings: object                # env.Settings, read once (and checked) here
    compiler: object                # the jit Compiler, known to be usable

    @property
    def prefix(self) -> str:
        """Prefix of every line a sharded job prints, so torchrun's merged output reads."""
        index, count = self.shard
        if count == 1:
            return ""
        return f"[rank {index}/{count}] " if self.shard_from_env else f"[shard {index}/{count}] "


def _run(args: argparse.Namespace) -> int:
    try:
        plan = make_plan(args)
    except ValueError as exc:       # ManifestError, ConfigError: the message says the fix
        print(f"prewarm: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.dry_run:
        return dry_run(args, plan)
    verbose = getattr(args, "verbose", False)      # dgemm-cache's -v, or main()'s
    note = _printer(plan.prefix)
    args.jobs = args.jobs or default_jobs(os.environ)
    started = time.monotonic()
    progress = Progress(f"{plan.prefix}prewarm", len(plan.mine),
                        enabled=not (args.no_progress or verbose))
    with StopSignals() as stop, _remote_log_quiet(not verbose):
        remote_down = _probe_remote(plan.settings)
        if remote_down:
            note(f"prewarm: warning: the remote cache (DGEMM_REMOTE_CACHE="
                 f"{_remote_for_display(plan.settings)}) is unavailable: "
                 f"{remote_down.rstrip('.')}. Compiling into the local cache only; the job "
                 f"will exit 3 unless the remote cache takes every kernel by the end")
        on_outcome = _kernel_printer(note, plan, len(plan.mine)) if verbose else None
        outcomes = compile_all(plan.mine, args.jobs, progress, stop=stop.event,
                               on_outcome=on_outcome, verbose=verbose)
        progress.close()
        remote_status = None
        if plan.settings.remote is not None and not stop.event.is_set():
            remote_status = fill_remote(outcomes, plan.settings,
                                        note=_remote_printer(note, plan) if verbose else None)
    report = build_report(args, plan, outcomes, remote_status, stop.signal_name,
                          wall_seconds=time.monotonic() - started)
    _print(args, plan, report)
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


def make_plan(args: argparse.Namespace) -> Plan:
    """Everything checked before any work: settings, shard, manifest, arch, specs, compiler,
    csrc tree and cache directory. ValueError (ManifestError, ConfigError) saying the fix."""
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
    from_env = args.shard is None
    shard = args.shard or shard_from_env(os.environ)
    source = f"preset {args.preset}" if args.preset else f"manifest {args.manifest}"
    manifest = (manifests.load_preset(args.preset) if args.preset
                else manifests.load_manifest(args.manifest))
    problem_list = manifests.problems(manifest, args.m_range, args.contiguous_spread)
    family = portable_fp8.NAME if args.portable else None
    served = manifests.specs_for(problem_list, args.num_sms, args.arch, family=family)
    index, count = shard
    mine = list(served)[index::count]
    compiler = check_toolchain(settings, next(iter(served)))
    check_cache_dir(settings, create=not args.dry_run)
    return Plan(source, shard, from_env and count > 1 and "RANK" in os.environ, problem_list,
                served, mine, settings, compiler)


def check_toolchain(settings, spec: KernelSpec):
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
# Signals
# ------------------------------------------------------------------------------------------
class StopSignals:
    """While the job runs, SIGINT and SIGTERM set `event` (the first one is remembered) instead
    of raising into the pool's bookkeeping; the previous handlers come back on exit. Outside
    the main thread, where Python cannot take signals, it installs nothing."""

    def __init__(self):
        self.event = threading.Event()
        self.signum: Optional[int] = None
        self._previous: dict = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, _frame) -> None:
        if self.signum is None:
            self.signum = signum
        self.event.set()

    @property
    def signal_name(self) -> Optional[str]:
        return None if self.signum is None else signal.Signals(self.signum).name


# ------------------------------------------------------------------------------------------
# Compiling
# ------------------------------------------------------------------------------------------
def compile_all(specs: list[KernelSpec], jobs: int, progress: Progress,
                stop: Optional[threading.Event] = None,
                on_outcome: Optional[Callable[[dict], None]] = None,
                verbose: bool = False) -> list[dict]:
    """One outcome dict per finished spec (status compiled | cached | downloaded | failed), in
    the order the specs finish. Even one job uses a worker process: a compiler crash then
    costs one outcome instead of the report, and this process keeps no kernels in memory.
    When `stop` is set, pending specs are cancelled and the workers terminated (they may be
    in the middle of a compile); the outcomes of the specs that finished are returned."""
    outcomes = []
    tally = {"compiled": 0, "cached": 0, "downloaded": 0, "failed": 0}
    stop = stop or threading.Event()

    def record(outcome: dict) -> None:
        outcomes.append(outcome)
        tally[outcome["status"]] += 1
        progress.advance(" ".join(f"{name} {n}" for name, n in tally.items()))
        if on_outcome is not None:
            on_outcome(outcome)

    if not specs:
        return outcomes
    # spawn, not fork: a worker must not inherit this process's Redis sockets, locks or
    # half-initialised CUDA state; it imports dgemm afresh and reads the same environment.
    context = multiprocessing.get_context("spawn")
    before = set(multiprocessing.active_children())
    pool = concurrent.futures.ProcessPoolExecutor(
        min(jobs, len(specs)), mp_context=context, initializer=init_worker,
        initargs=(os.getpid(), verbose))
    pending = {}
    try:
        with _stop_signals_blocked():       # the pool starts its workers in `submit`
            pending = {pool.submit(prewarm_one, spec): spec for spec in specs}
        while pending and not stop.is_set():
            done, _ = concurrent.futures.wait(pending, timeout=_STOP_POLL_S,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                record(_result(future, pending.pop(future)))
    finally:
        if pending:                 # stopped (or an exception): do not wait for the rest
            _stop_pool(pool, set(multiprocessing.active_children()) - before)
        else:
            pool.shutdown(wait=True)
    return outcomes


def _result(future: concurrent.futures.Future, spec: KernelSpec) -> dict:
    try:
        return future.result()
    except Exception as exc:          # the worker process itself died (e.g. a crash)
        return _outcome(spec, "failed", 0.0, 0.0,
                        error=f"worker process failed: {type(exc).__name__}: {exc}")


def _stop_pool(pool, workers: set) -> None:
    """Cancel what has not started and end the workers now, with SIGKILL: they take no stop
    signal (see `init_worker`), and a compile in NVRTC is C code that nothing gentler would
    interrupt. The pool cancels its pending futures itself, told before any worker dies: a
    future cancelled here could still be failed by the pool when it sees a worker gone, which
    CPython 3.11 answers with an InvalidStateError traceback from its manager thread."""
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.kill()
    for worker in workers:
        worker.join(_KILL_WAIT_S)


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def _stop_signals_blocked():
    """SIGINT and SIGTERM held back (not lost: delivered when this ends) while the pool starts
    its workers, which inherit the blocked mask: a Ctrl-C or a SIGTERM sent to the whole
    process group (a terminal, systemd) cannot kill a worker still importing dgemm, which
    the pool would report as failed kernels. Each worker takes the signals itself once its
    initializer has set them to do nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_PR_SET_PDEATHSIG = 1            # <linux/prctl.h>
_PARENT_POLL_S = 0.5


def init_worker(parent_pid: int, verbose: bool) -> None:
    """Pool worker initializer. The job process decides when to stop: a Ctrl-C (which a
    terminal sends to every process of the job) or a SIGTERM to the process group must not
    raise into a compile or kill a worker before the job has stopped the pool (it kills its
    workers itself). No-op handlers rather than SIG_IGN, so that an nvcc this worker starts
    gets the default actions again and dies with the Ctrl-C; then the signals, blocked while
    the pool started this worker, are let in. Without -v, the remote tier's warnings stay
    quiet here: the job checks the remote once and reports it."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _ignore_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    if not verbose:
        logging.getLogger("dgemm.remote").setLevel(logging.ERROR)
    die_with_parent(parent_pid)


def _ignore_signal(_signum, _frame) -> None:
    pass


def die_with_parent(parent_pid: int) -> None:
    """End this worker when the job process `parent_pid` ends, however it ends. A worker holds
    hundreds of MB; a SIGKILLed job must not leave it waiting forever for work. On Linux the
    kernel sends SIGKILL when the parent goes (PR_SET_PDEATHSIG); a daemon thread that sees
    this process re-parented covers other systems and a failed prctl. (The signal follows the
    *thread* that started the worker: `compile_all` starts, uses and stops the pool in one
    thread, so it outlives every worker.)"""
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
                    outcome.compile_seconds, key=outcome.key, tier=outcome.source)


# Where the walk found the kernel -> the status this report gives it.
_STATUS = {"compiled": "compiled", "remote": "downloaded", "disk": "cached", "memory": "cached"}


def _outcome(spec: KernelSpec, status: str, seconds: float, compile_seconds: float,
             key: str | None = None, error: str | None = None, tier: str | None = None) -> dict:
    return {"spec": spec, "key": key, "status": status, "tier": tier,
            "seconds": round(seconds, 3), "compile_seconds": round(compile_seconds, 3),
            "error": error, "remote": None}


def _count(outcomes: list[dict], status: str) -> int:
    return sum(1 for o in outcomes if o["status"] == status)


# ------------------------------------------------------------------------------------------
# The remote cache: checked once up front, verified (and filled) at the end
# ------------------------------------------------------------------------------------------
def _fresh_tier(settings):
    """A remote tier of its own (own connection and circuit breaker), so that the job's
    checks really ask Redis instead of being refused by a breaker an earlier failure opened."""
    from dgemm.jit.remote import RemoteTier
    remote = settings.remote
    return RemoteTier.connect(remote.url, remote.namespace, remote.settings, settings.secret)


@contextlib.contextmanager
def _remote_log_quiet(quiet: bool):
    """Without -v, this process's remote-tier warnings stay quiet: the job says once what
    is wrong with the remote cache (up front, and in the report)."""
    remote_logger = logging.getLogger("dgemm.remote")
    level = remote_logger.level
    if quiet:
        remote_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        remote_logger.setLevel(level)


def _probe_remote(settings) -> Optional[str]:
    """None when the remote cache is unset or answers a PING; else why it does not."""
    from cache_service.errors import RemoteUnavailable
    if settings.remote is None:
        return None
    cache = _fresh_tier(settings).cache
    try:
        cache.call(cache.client.ping)
    except RemoteUnavailable as error:
        return _reason(error, cache)
    return None


def fill_remote(outcomes: list[dict], settings,
                note: Optional[Callable[[dict, str], None]] = None) -> dict:
    """Make sure Redis holds the kernel of every outcome that has one: one pipelined EXISTS per
    batch of keys, then an upload from the local disk of each one Redis lacks. Sets each
    outcome's "remote" to present | uploaded | missing and returns the counts and the first
    error. `note(outcome, what)` is told of each upload and each kernel left missing."""
    from cache_service.errors import RemoteUnavailable
    from dgemm.jit.tiers import DiskTier

    kernels = [o for o in outcomes if o["key"] is not None]
    status = {"kernels": len(kernels), "present": 0, "uploaded": 0, "missing": 0,
              "error": None}
    tier = _fresh_tier(settings)
    disk = DiskTier(settings.cache_dir, settings.secret)
    try:
        for start in range(0, len(kernels), _BATCH):
            batch = kernels[start:start + _BATCH]
            keys = [o["key"] for o in batch]
            found = tier.cache.call(lambda: tier.cache.store.present(keys))
            for outcome, there in zip(batch, found):
                outcome["remote"] = "present" if there else _upload(tier, disk, outcome)
                if outcome["remote"] == "missing" and status["error"] is None:
                    status["error"] = "not on the local disk either, so it cannot be uploaded"
                if note is not None and outcome["remote"] != "present":
                    note(outcome, outcome["remote"])
    except RemoteUnavailable as error:
        status["error"] = _reason(error, tier.cache)
    for outcome in kernels:
        if outcome["remote"] is None:
            outcome["remote"] = "missing"
            if note is not None:
                note(outcome, "missing")
        status[outcome["remote"]] += 1
    return status


def _upload(tier, disk, outcome: dict) -> str:
    """uploaded | missing (not on disk). Raises RemoteUnavailable (down, full)."""
    entry = disk.get(outcome["key"])       # verified; what Redis gets is checked here
    if entry is None:
        return "missing"
    tier.put(entry)
    return "uploaded"


def _reason(error, cache) -> str:
    """A remote failure without the URL the breaker prefixes (the report shows it once)."""
    text = str(error)
    name = f"{cache.breaker.name}: "
    return text[len(name):] if text.startswith(name) else text


# ------------------------------------------------------------------------------------------
# Dry run
# ------------------------------------------------------------------------------------------
def dry_run(args: argparse.Namespace, plan: Plan) -> int:
    """List this shard's kernels with the M they serve, their keys and whether each is on the
    local disk and in Redis; compile nothing. Exit 3 when the remote cannot be asked."""
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
        with _remote_log_quiet(not getattr(args, "verbose", False)):
            remote_error = _mark_in_remote(kernels, _fresh_tier(plan.settings))
    report = {"dry_run": True, "source": plan.source, "arch": args.arch,
              "num_sms": args.num_sms, "shard": list(plan.shard),
              "problems": len(plan.problems), "specs_total": len(plan.served),
              "specs_in_shard": len(kernels), "compiler": plan.compiler.identity,
              "cache_dir": str(plan.settings.cache_dir),
              "remote": _remote_for_display(plan.settings), "remote_error": remote_error,
              "local": sum(k["local"] for k in kernels),
              "in_remote": sum(bool(k["remote"]) for k in kernels),
              "to_compile": sum(not k["local"] and not k["remote"] for k in kernels),
              "kernels": kernels}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_prefixed(format_dry_run(report), plan.prefix))
    return EXIT_REMOTE if remote_error else EXIT_OK


def _mark_in_remote(kernels: list[dict], tier) -> Optional[str]:
    """Set each kernel's "remote" to whether Redis holds its key (one pipelined EXISTS per
    batch); None, or why Redis could not be asked."""
    from cache_service.errors import RemoteUnavailable
    try:
        for start in range(0, len(kernels), _BATCH):
            batch = kernels[start:start + _BATCH]
            names = [k["key"] for k in batch]
            found = tier.cache.call(lambda: tier.cache.store.present(names))
            for kernel, there in zip(batch, found):
                kernel["remote"] = bool(there)
    except RemoteUnavailable as error:
        return _reason(error, tier.cache)
    return None


def format_dry_run(report: dict) -> str:
    index, count = report["shard"]
    remote = report["remote"]
    lines = [f"dgemm prewarm --dry-run: {report['source']}, {report['arch']}, "
             f"{report['num_sms']} SMs, shard {index}/{count}, {report['compiler']}",
             f"  {report['specs_in_shard']} kernels ({report['specs_total']} in all shards) "
             f"for {report['problems']} problems: {report['local']} on local disk "
             f"({report['cache_dir']}), " + (
                 f"{report['in_remote']} in {remote}" if remote and not report["remote_error"]
                 else f"remote {remote} unavailable: {report['remote_error']}" if remote
                 else "no remote cache (DGEMM_REMOTE_CACHE unset)")
             + f"; {report['to_compile']} to compile", "",
             f"  {'local':<5} {'remote':<6}  {'key':<12}  kernel"]
    for kernel in report["kernels"]:
        in_remote = {True: "yes", False: "no", None: "-"}[kernel["remote"]]
        lines.append(f"  {'yes' if kernel['local'] else 'no':<5} {in_remote:<6}  "
                     f"{kernel['key'][:12]:<12}  {_describe_spec(kernel['spec'])} "
                     f"(M {kernel['m_values']})")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------
def build_report(args: argparse.Namespace, plan: Plan, outcomes: list[dict],
                 remote_status: Optional[dict], interrupted: Optional[str],
                 wall_seconds: float) -> dict:
    kernels = []
    for outcome in sorted(outcomes, key=lambda o: o["spec"].to_json()):
        served = plan.served[outcome["spec"]]
        kernels.append(dict(outcome, spec=json.loads(outcome["spec"].to_json()),
                            m_values=manifests.format_m_values(p.m for p in served),
                            problems=[dataclasses.asdict(p) for p in served]))
    return {
        "source": plan.source, "arch": args.arch, "num_sms": args.num_sms,
        "shard": list(plan.shard), "problems": len(plan.problems),
        "specs_total": len(plan.served), "specs_in_shard": len(plan.mine),
        "compiled": _count(outcomes, "compiled"),
        "already_cached": _count(outcomes, "cached") + _count(outcomes, "downloaded"),
        "downloaded": _count(outcomes, "downloaded"),
        "failed": _count(outcomes, "failed"),
        "unfinished": len(plan.mine) - len(outcomes),
        "interrupted": interrupted,
        "wall_seconds": round(wall_seconds, 3),
        "compile_seconds": round(sum(o["compile_seconds"] for o in outcomes), 3),
        "jobs": args.jobs, "cache_dir": str(plan.settings.cache_dir),
        "remote": _remote_for_display(plan.settings), "remote_status": remote_status,
        "kernels": kernels,
    }


def _print(args, plan: Plan, report: dict) -> None:
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_prefixed(format_report(report), plan.prefix))


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
    ]
    if report["interrupted"]:
        lines.append(f"  interrupted       {report['interrupted']}: {report['unfinished']} "
                     f"kernels not finished (a rerun resumes)")
    lines += [
        f"  wall time         {report['wall_seconds']:>8.1f} s with {report['jobs']} jobs",
        f"  compile time      {report['compile_seconds']:>8.1f} s summed over kernels",
        f"  local cache       {report['cache_dir']}",
        f"  remote cache      {_remote_line(report)}",
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


def _remote_line(report: dict) -> str:
    url, status = report["remote"], report["remote_status"]
    if url is None:
        return "off (DGEMM_REMOTE_CACHE unset)"
    if status is None:
        return f"{url}: not checked (interrupted)"
    line = (f"{url}: {status['present'] + status['uploaded']} of {status['kernels']} kernels "
            f"there ({status['uploaded']} uploaded at the end)")
    if status["missing"] or status["error"]:
        line += f"; {status['missing']} MISSING: {status['error']}"
    return line


def _describe(kernel: dict) -> str:
    return f"{_describe_spec(kernel['spec'])} (M {kernel['m_values']})"


def _describe_spec(spec: dict) -> str:
    return (f"{spec['kernel']} {spec['gemm_type']} n={spec['n']} k={spec['k']} "
            f"groups={spec['num_groups']} tile {spec['block_m']}x{spec['block_n']}x"
            f"{spec['block_k']} stages={spec['num_stages']} "
            f"multicast={spec['num_tma_multicast']}")


def _describe_outcome(outcome: dict, served: dict) -> str:
    return _describe({"spec": json.loads(outcome["spec"].to_json()),
                      "m_values": manifests.format_m_values(
                          p.m for p in served[outcome["spec"]])})


def _printer(prefix: str) -> Callable[[str], None]:
    def note(line: str) -> None:
        print(f"{prefix}{line}", file=sys.stderr, flush=True)
    return note


_HOW = {"compiled": "compiled in {compile_seconds:.2f} s", "memory": "cached (memory)",
        "disk": "cached on local disk", "remote": "downloaded from the remote cache"}


def _kernel_printer(note, plan: Plan, total: int) -> Callable[[dict], None]:
    """-v: one line per kernel as it finishes: the tier that answered, or the compile time,
    or the first line of the failure."""
    done = [0]

    def on_outcome(outcome: dict) -> None:
        done[0] += 1
        if outcome["status"] == "failed":
            how = "FAILED: " + (outcome["error"] or "").splitlines()[0][:200]
        else:
            how = _HOW[outcome["tier"]].format(**outcome)
        note(f"prewarm: [{done[0]}/{total}] {(outcome['key'] or '-')[:12]} {how}; "
             f"{_describe_outcome(outcome, plan.served)}")
    return on_outcome


_REMOTE_HOW = {"uploaded": "uploaded to the remote cache",
               "missing": "NOT in the remote cache"}


def _remote_printer(note, plan: Plan) -> Callable[[dict, str], None]:
    def on_remote(outcome: dict, what: str) -> None:
        note(f"prewarm: {outcome['key'][:12]} {_REMOTE_HOW[what]}; "
             f"{_describe_outcome(outcome, plan.served)}")
    return on_remote


def _prefixed(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines()) if prefix else text


def _remote_for_display(settings) -> str | None:
    """The remote URL without its password, which must not end up in logs."""
    from cache_service.client import redact
    return None if settings.remote is None else redact(settings.remote.url)


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
