"""Adversarial probe of dgemm's kernel cache (issue 15): inject faults into the cache walk, the
disk and Redis tiers and the `dgemm-cache` command, and count what went wrong.

    python tools/cache_probe.py [--quick] [--json OUT] [--family NAME]... [--seed N] [--keep]

CPU only, no GPU: ranks compile the trivial test kernels of tests/data/csrc (milliseconds a
compile), so the fault, not the compiler, decides every trial. Needs redis-server on PATH and
the dgemm under test importable (from a checkout: `PYTHONPATH=$PWD python tools/...`); its Redis
servers are the test suite's (tests/redis_server.py: redis-py and pytest).

A trial runs real processes, each with a time bound, under one injected fault: "ranks" that
walk the cache for a few specs (`dgemm.jit.ensure_compiled_outcome`, what a GPU rank does before
it loads a kernel) and `dgemm-cache` commands. They are forked from a server process that
imported dgemm once (multiprocessing's forkserver), so a process costs milliseconds instead of
torch's import. The prewarm family runs the real `dgemm-cache prewarm` as a subprocess, since
its process tree is what it tests. The true cubin of every spec comes from a clean compile
before any fault; a served cubin is compared with it by sha256.

Columns of the table (one row per fault family; from "refused" on they count events):
    trials          trials run (each variant of the family, repeated in full mode)
    faults          faults injected: kills, stops, corruptions, server faults, bad inputs, and
                    the contending ranks of the concurrency family
    ok              trials in which none of the failure columns below counted anything
    refused         GEMMs refused with the clear error the issue allows (an unsafe cache
                    directory: CacheDirError; a bad setting: ConfigError)
    corrupt served  GEMMs served with a cubin other than the true one
    hangs           processes still running at their bound (--quick 30 s, else 60 s), and
                    processes of a killed prewarm still alive 10 s later
    crashes         GEMMs not served (an exception escaped the walk, or the rank died), and
                    commands that exited with a status other than the documented one
    tracebacks      processes that printed a Python traceback, and GEMMs that failed with an
                    exception that is not one of dgemm's or cache_service's (a raw internal error)
    extra compiles  compiles beyond one per kernel where the cache promises one (ranks on one
                    node, nodes sharing one Redis, a Redis that holds the kernels)
    damage          files that are not dgemm's deleted or replaced (gc, export)
    max s to serve  the slowest GEMM served (one walk of one spec, inside its rank)

Variants that chown to another uid or make a device node run only as root (skipped otherwise).
Exit status: 0 when corrupt served, hangs, crashes, tracebacks, extra compiles and damage are
all zero and no trial failed in the probe itself; 1 otherwise; 2 when the probe cannot run (no
redis-server, dgemm not importable).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import hashlib
import io
import itertools
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))     # redis_server: the test suite's Redis servers
if TYPE_CHECKING:
    from redis_server import NotRedis, RedisServer
REDIS_SERVER = shutil.which("redis-server")
NOBODY = 65534                      # the "other local user" of the ownership trials (as root)
SECRET = "probe-secret"             # DGEMM_CACHE_SECRET of the trials that set one
OTHER_SECRET = b"someone-else"
PROBLEM_M = 128
# (n, k) candidates for the spec pool: each trial draws distinct specs (distinct keys) from it.
POOL_NK = [(n, k) for k in (512, 2048, 7168) for n in (256, 512, 1024, 1536, 2048, 4096)]
POOL_SIZE = 8
FOREVER_S = 600                     # a DGEMM_TEST_PAUSE the probe ends with SIGKILL or SIGSTOP
# Memory a child may take beyond what it holds at its start: a walk or a command needs a few MiB,
# an unbounded read fails here with MemoryError instead of exhausting the host.
MEMORY_HEADROOM = 256 << 20
ORPHAN_GRACE_S = 10.0               # how soon a killed prewarm's workers must be gone


# ------------------------------------------------------------------------------------------------
# Modes, tallies, the family registry
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Mode:
    name: str
    full: bool
    timeout_s: float            # a process still running after this long is a hang
    lease_ttl: Optional[str]    # DGEMM_REMOTE_LEASE_TTL of the lease trials (None: the default)
    contenders: int             # ranks started at once on one key


QUICK = Mode("quick", full=False, timeout_s=30.0, lease_ttl="8", contenders=8)
FULL = Mode("full", full=True, timeout_s=60.0, lease_ttl=None, contenders=16)

FAILURE_COLUMNS = ("corrupt", "hangs", "crashes", "tracebacks", "extra_compiles", "damage")
COLUMNS = (("trials", "trials"), ("faults", "faults"), ("ok", "ok"), ("refused", "refused"),
           ("corrupt", "corrupt served"), ("hangs", "hangs"), ("crashes", "crashes"),
           ("tracebacks", "tracebacks"), ("extra_compiles", "extra compiles"),
           ("damage", "damage"), ("max_serve_s", "max s to serve"))


@dataclasses.dataclass
class Tally:
    trials: int = 0
    faults: int = 0
    ok: int = 0
    refused: int = 0
    corrupt: int = 0
    hangs: int = 0
    crashes: int = 0
    tracebacks: int = 0
    extra_compiles: int = 0
    damage: int = 0
    skipped: int = 0
    probe_errors: int = 0       # the probe's own trouble in a trial: it measured nothing there
    max_serve_s: float = 0.0

    def add(self, other: "Tally") -> None:
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            setattr(self, field.name,
                    max(mine, theirs) if field.name == "max_serve_s" else mine + theirs)

    @property
    def failures(self) -> int:
        return sum(getattr(self, column) for column in FAILURE_COLUMNS)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    run: Callable               # run(trial, variant) -> None; records into trial.tally
    variants: tuple
    full_repeat: int            # full mode runs every variant this many times
    slow: bool                  # its trials wait out leases or time bounds: start them first

    def plan(self, mode: Mode) -> list:
        repeat = self.full_repeat if mode.full else 1
        return [variant for _ in range(repeat) for variant in self.variants]


FAMILIES: list = []


def family(name: str, variants, full_repeat: int = 1, slow: bool = False):
    """Register a fault family: a function run(trial, variant) for each of `variants`."""
    def register(run):
        FAMILIES.append(Family(name, run, tuple(variants), full_repeat, slow))
        return run
    return register


# ------------------------------------------------------------------------------------------------
# What runs inside a forked rank or command
# ------------------------------------------------------------------------------------------------
def _child_main(job: dict, environ: dict, log_path: str, limits: dict, results) -> None:
    """Entry point of a forked child: its own log, environment and limits, then the job. A rank
    sends what it served through `results`; a command exits with dgemm-cache's status."""
    descriptor = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    os.environ.clear()
    os.environ.update(environ)
    _apply_limits(limits)
    if job["kind"] == "walk":
        results.send(_walk(job["problems"], job.get("start_at")))
        return
    from dgemm import cli
    sys.exit(cli.main(job["argv"]))


def _walk(problems: list, start_at: Optional[float]) -> dict:
    """One rank: the cache walk for each (m, n, k), as `dgemm.fp8_gemm_nt` does before it loads
    the kernel. Records the served cubin's sha256, or the exception that escaped."""
    import dgemm.jit
    from cache_service.errors import CacheServiceError
    from dgemm.heuristics import select
    from dgemm.jit.errors import DgemmError

    if start_at is not None:            # contenders start together, not one fork apart
        time.sleep(max(0.0, start_at - time.time()))
    served = []
    for m, n, k in problems:
        spec = select("fp8_gemm_nt", m, n, k)
        started = time.perf_counter()
        try:
            outcome = dgemm.jit.ensure_compiled_outcome(spec)
        except Exception as error:      # what a training script would die of
            served.append({"error": f"{type(error).__name__}: {error}"[:400],
                           "error_type": type(error).__name__,
                           "clear": isinstance(error, (DgemmError, CacheServiceError))})
            continue
        served.append({"key": outcome.key, "sha256": outcome.entry.cubin_sha256,
                       "source": outcome.source, "seconds": time.perf_counter() - started})
    return {"served": served, "stats": dgemm.jit.stats()}


def _apply_limits(limits: dict) -> None:
    """Every child gets MEMORY_HEADROOM; some get a file size limit (a full disk) or lose root's
    power to ignore file modes (a read-only directory even for root)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # over the size limit: EFBIG, not death
    data = _vm_data_bytes() + MEMORY_HEADROOM
    resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    if limits.get("fsize") is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
    if limits.get("drop_dac") and os.geteuid() == 0:
        _drop_file_capabilities()


def _vm_data_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    return 1 << 30


def _drop_file_capabilities() -> None:
    """Drop CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER (capset(2)): root then obeys
    file modes, so a 0500 directory is read-only for it as for any user."""
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(0x20080522, 0), (Data * 2)()      # _LINUX_CAPABILITY_VERSION_3
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    keep = ~((1 << 1) | (1 << 2) | (1 << 3)) & 0xFFFFFFFF
    data[0].effective &= keep
    data[0].permitted &= keep
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


# ------------------------------------------------------------------------------------------------
# Processes as the probe sees them
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Proc:
    """What one rank or command did."""
    role: str
    exitcode: Optional[int]
    timed_out: bool
    killed: bool                # on purpose, by the probe (the fault itself)
    result: Optional[dict]      # a rank's report
    log: str


# multiprocessing reads a child's exit status from a pipe, once: two threads polling one child
# (and every Process.start() polls all children) can take it from each other, leaving exit code
# 255. Starts and polls hold this lock; waits only watch the pipe, outside it.
_POLL_LOCK = threading.Lock()


class Child:
    """A forked rank or command, bounded by the mode's timeout from its start."""

    def __init__(self, trial: "Trial", role: str, job: dict, environ: dict, limits: dict):
        self.trial, self.role, self.job = trial, role, job
        self.log_path = trial.dir / f"{next(trial.serial):02d}-{role}.log"
        self.killed = False
        self._proc: Optional[Proc] = None
        context = trial.lab.context
        self._results, writer = context.Pipe(duplex=False)
        self.process = context.Process(target=_child_main, args=(
            job, environ, str(self.log_path), limits, writer))
        with _POLL_LOCK:
            self.process.start()
        writer.close()
        self.deadline = time.monotonic() + trial.lab.mode.timeout_s

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exitcode(self) -> Optional[int]:
        with _POLL_LOCK:
            return self.process.exitcode

    def _wait(self, timeout: float) -> None:
        multiprocessing.connection.wait([self.process.sentinel], max(0.0, timeout))

    def wait_for(self, path: Path) -> bool:
        """Wait until `path` has content (a DGEMM_TEST_PAUSE_MARKER); False if the process ended
        or the bound passed first."""
        while True:
            ended = self.exitcode is not None      # before the look: it writes, then ends
            with contextlib.suppress(OSError):
                if path.stat().st_size > 0:
                    return True
            if ended or time.monotonic() > self.deadline:
                return False
            time.sleep(0.02)

    def signal(self, number: int) -> None:
        if self.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, number)

    def kill(self) -> None:
        """SIGKILL on purpose: the fault, not a verdict."""
        self.killed = True
        self.signal(signal.SIGKILL)

    def finish(self) -> Proc:
        if self._proc is None:
            self._wait(self.deadline - time.monotonic())
            timed_out = self.exitcode is None and not self.killed
            if self.exitcode is None:
                self.signal(signal.SIGKILL)
                self._wait(10)
            result = None
            with contextlib.suppress(EOFError, OSError):
                if self._results.poll():
                    result = self._results.recv()
            self._results.close()
            log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            self._proc = Proc(self.role, self.exitcode, timed_out, self.killed, result,
                              log[-20000:])
        return self._proc


# ------------------------------------------------------------------------------------------------
# Redis, real and fake: the test suite's RedisServer (here on a unix socket: no port to race for)
# and NotRedis, from tests/redis_server.py (imported where a trial needs one; main checks it)
# ------------------------------------------------------------------------------------------------
def publish(server, key: str, blob: bytes) -> None:
    """Publish `blob` under `key` in `server` as a node would (blob, index and meta in one
    script)."""
    from cache_service.namespace import Namespace
    from cache_service.store import EntryStore
    from dgemm.jit import entry as entry_format
    EntryStore(server.client(), Namespace(), describe=entry_format.describe).store(key, blob)


# ------------------------------------------------------------------------------------------------
# The lab (shared by all trials) and one trial
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Truth:
    """A spec of the pool and its true entry, from a clean compile before any fault."""
    problem: tuple              # (m, n, k)
    key: str
    sha256: str                 # of the cubin
    blob: bytes                 # the clean entry (unsigned)


class Lab:
    """What all trials share: the mode, a work directory, the csrc overlay with the test kernels,
    the forkserver, the environment of every child, and the true entries of the spec pool."""

    def __init__(self, mode: Mode, seed: int, workers: int):
        self.mode, self.seed, self.workers = mode, seed, workers
        self.root = Path(tempfile.mkdtemp(prefix="dgemm-probe-"))
        self.root.chmod(0o755)
        self.csrc = self.root / "csrc"
        shutil.copytree(REPO / "csrc", self.csrc)
        shutil.copytree(REPO / "tests" / "data" / "csrc", self.csrc, dirs_exist_ok=True)
        self.context = multiprocessing.get_context("forkserver")
        # dgemm.heuristics imports torch (`import dgemm` and dgemm.cli no longer do), which
        # ranks and the pull/sync commands need: preloaded, a child costs no torch import.
        self.context.set_forkserver_preload(["__main__", "dgemm", "dgemm.cli", "dgemm.heuristics",
                                             "redis", "cache_service.remote_cache"])
        self.base_env = {name: value for name, value in os.environ.items()
                         if not name.startswith("DGEMM_")}
        self.base_env["DGEMM_CSRC_DIR"] = str(self.csrc)
        # The prewarm family's subprocess and its workers import the same dgemm as the probe.
        import dgemm
        self.base_env["PYTHONPATH"] = os.pathsep.join(filter(None, (
            str(Path(dgemm.__file__).resolve().parent.parent), os.environ.get("PYTHONPATH"))))
        self.truth: list = []
        self._lock = threading.Lock()
        self._open: list = []       # children and servers to end if a trial left them running

    def track(self, thing):
        with self._lock:
            self._open.append(thing)
        return thing

    def compile_truth(self) -> None:
        """The true entry of every spec of the pool, from one clean rank."""
        from dgemm.heuristics import select
        from dgemm.jit import entry as entry_format
        from dgemm.jit.tiers import DiskTier
        problems, seen = [], set()
        for n, k in POOL_NK:
            spec = select("fp8_gemm_nt", PROBLEM_M, n, k).to_json()
            if spec not in seen and len(problems) < POOL_SIZE:
                seen.add(spec)
                problems.append((PROBLEM_M, n, k))
        trial = Trial(self, "truth", "clean", 0)
        node = trial.node("truth")
        proc = trial.rank(trial.env(node), problems, indices=False).finish()
        served = (proc.result or {}).get("served", [])
        if len(served) != len(problems) or any("error" in s for s in served):
            raise RuntimeError(f"the clean compile of the spec pool failed:\n{proc.log}\n{served}")
        for problem, record in zip(problems, served):
            blob = DiskTier(node).entry_path(record["key"]).read_bytes()
            entry = entry_format.unpack(blob, record["key"])
            assert entry.cubin_sha256 == record["sha256"]
            self.truth.append(Truth(problem, record["key"], record["sha256"], blob))

    def close(self, keep: bool) -> None:
        for thing in self._open:
            with contextlib.suppress(Exception):
                thing.kill()
        if not keep:
            shutil.rmtree(self.root, onerror=_make_writable_and_retry)


def _make_writable_and_retry(function, path, _exc_info) -> None:
    with contextlib.suppress(OSError):
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700)
    with contextlib.suppress(OSError):
        function(path)


class Trial:
    """One trial: its directory, its seeded randomness, its processes and servers, and its
    tally (one trial; every verdict below adds to it)."""

    def __init__(self, lab: Lab, family_name: str, variant: str, ordinal: int):
        self.lab, self.family, self.variant, self.ordinal = lab, family_name, variant, ordinal
        self.dir = lab.root / f"{family_name}-{ordinal:02d}-{variant}"
        self.dir.mkdir()
        self.rng = random.Random(f"{lab.seed}:{family_name}:{ordinal}")
        self.tally = Tally(trials=1)
        self.notes: list = []
        self.serial = itertools.count()
        self._children: list = []
        self._servers: list = []

    @property
    def mode(self) -> Mode:
        return self.lab.mode

    # --- building blocks ---------------------------------------------------------------------
    def specs(self, count: int) -> list:
        """`count` distinct specs of the pool (indices into lab.truth)."""
        return self.rng.sample(range(len(self.lab.truth)), count)

    def node(self, name: str) -> Path:
        """A node's cache dir (DGEMM_CACHE_DIR): nodes share nothing but Redis."""
        return self.dir / f"node-{name}"

    def env(self, node: Path, remote=None, **extra) -> dict:
        environ = dict(self.lab.base_env, DGEMM_CACHE_DIR=str(node))
        if remote is not None:
            environ.update(DGEMM_REMOTE_CACHE=remote.url, DGEMM_REMOTE_TIMEOUT="1")
        environ.update({name: str(value) for name, value in extra.items()})
        return environ

    def rank(self, environ: dict, specs: list, role: str = "rank", indices: bool = True,
             start_at: Optional[float] = None, **limits) -> Child:
        problems = [self.lab.truth[i].problem for i in specs] if indices else specs
        return self._start(role, {"kind": "walk", "problems": problems, "start_at": start_at},
                           environ, limits)

    def cli(self, environ: dict, *argv, role: str = "cli") -> Child:
        return self._start(role, {"kind": "cli", "argv": [str(a) for a in argv]}, environ, {})

    def _start(self, role, job, environ, limits) -> Child:
        child = Child(self, role, job, environ, limits)
        self._children.append(self.lab.track(child))
        return child

    def redis(self, name: str = "redis") -> RedisServer:
        from redis_server import RedisServer
        server = RedisServer(self.dir / name, unix_socket=True)
        self._servers.append(self.lab.track(server))
        return server.start()

    def fake_redis(self, replies: list) -> NotRedis:
        """A server that answers every command with the next of `replies`."""
        from redis_server import NotRedis
        server = NotRedis(replies, unix_socket=self.dir / "fake.sock")
        self._servers.append(self.lab.track(server))
        return server

    def seed(self, node: Path, specs: list, secret: Optional[bytes] = None) -> None:
        """Put the true entries of `specs` on `node`'s disk, as a prewarmed cache."""
        for index in specs:
            truth = self.lab.truth[index]
            plant(entry_path(node, truth.key), seal(truth, secret))

    # --- verdicts -----------------------------------------------------------------------------
    def fault(self, count: int = 1) -> None:
        self.tally.faults += count

    def skip(self, why: str) -> None:
        self.tally.skipped += 1
        self.notes.append(f"skipped: {why}")

    def problem(self, column: str, note: str) -> None:
        setattr(self.tally, column, getattr(self.tally, column) + 1)
        self.notes.append(f"{column}: {note}".replace(str(self.dir), "<trial>"))

    def check_rank(self, child: Child, specs: list, allowed: tuple = ()) -> Proc:
        """Every spec served with its true cubin, or refused with one of the `allowed` errors."""
        proc = child.finish()
        if proc.killed:
            return proc
        if proc.timed_out:
            self.problem("hangs", f"{proc.role} still running after {self.mode.timeout_s:g} s")
            return proc
        traceback = "Traceback" in proc.log
        if traceback:
            self.problem("tracebacks", f"{proc.role} printed {_traceback_summary(proc.log)}")
        if proc.result is None or proc.exitcode != 0:
            self.problem("crashes", f"{proc.role} died (exit {proc.exitcode})")
            return proc
        for index, record in zip(specs, proc.result["served"]):
            truth = self.lab.truth[index]
            if "error" in record:
                if record["error_type"] in allowed:
                    self.tally.refused += 1
                    continue
                self.problem("crashes", f"{proc.role}: {record['error']}")
                if not record["clear"] and not traceback:
                    self.problem("tracebacks", f"{proc.role}: uncaught {record['error_type']}")
            elif record["sha256"] != truth.sha256:
                self.problem("corrupt", f"{proc.role} served cubin {record['sha256'][:12]} for "
                                        f"key {truth.key[:12]}; the true one is "
                                        f"{truth.sha256[:12]}")
            else:
                self.tally.max_serve_s = max(self.tally.max_serve_s, record["seconds"])
        return proc

    def check_cli(self, child: Child, exits: set) -> Proc:
        """Exits with one of `exits`, in time, without a traceback."""
        proc = child.finish()
        argv = " ".join(child.job["argv"])
        if proc.timed_out:
            self.problem("hangs", f"dgemm-cache {argv} still running after "
                                  f"{self.mode.timeout_s:g} s")
            return proc
        if "Traceback" in proc.log:
            self.problem("tracebacks", f"dgemm-cache {argv}: {_traceback_summary(proc.log)}")
        if proc.exitcode not in exits:
            self.problem("crashes", f"dgemm-cache {argv} exited {proc.exitcode}; expected "
                                    f"{' or '.join(map(str, sorted(exits)))}")
        return proc

    def check_compiles(self, children: list, at_most: int) -> None:
        """The ranks together compiled at most `at_most` kernels."""
        compiles = sum(int((c.finish().result or {}).get("stats", {}).get("compiles", 0))
                       for c in children)
        if compiles > at_most:
            self.tally.extra_compiles += compiles - at_most
            self.notes.append(f"extra_compiles: {compiles} compiles where {at_most} were due")

    def check_kept(self, path: Path, before: tuple, what: str) -> None:
        """`path` is still what it was (`identity(path)` before the command)."""
        if identity(path) != before:
            self.problem("damage", f"{what} {path.name} was deleted or replaced")

    def close(self) -> None:
        for child in self._children:
            child.signal(signal.SIGCONT)
            child.finish()
        for server in self._servers:
            with contextlib.suppress(Exception):
                server.kill()


def _traceback_summary(log: str) -> str:
    """The exception line that ends the last traceback in `log`."""
    tail = log[log.rfind("Traceback"):].strip().splitlines()
    for line in reversed(tail):
        if line and not line.startswith((" ", "\t")):
            return f"a traceback ({line[:200]})"
    return "a traceback"


# ------------------------------------------------------------------------------------------------
# Entries: true, corrupted, forged
# ------------------------------------------------------------------------------------------------
_PREFIX = struct.Struct("<8sHBxI")      # docs/architecture.md, "The entry: one blob"


def entry_path(node: Path, key: str) -> Path:
    """Where `key`'s entry lives in the cache at `node`, with its shard directory made. The
    cache's directories are made by dgemm itself (DiskTier.ensure_dirs), so that the node is a
    dgemm cache by any test gc may apply."""
    from dgemm.jit.tiers import DiskTier
    disk = DiskTier(node)
    disk.ensure_dirs()
    path = disk.entry_path(key)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    return path


def plant(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def identity(path: Path) -> tuple:
    """What a path is (kind, inode, size, mtime), without following a final symlink."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ("missing",)
    return (stat.S_IFMT(info.st_mode), info.st_ino, info.st_size, info.st_mtime_ns)


def _entry(truth: Truth):
    from dgemm.jit import entry as entry_format
    return entry_format.unpack(truth.blob, truth.key)


def seal(truth: Truth, secret: Optional[bytes]) -> bytes:
    """The true entry, signed with `secret` (unsigned for None)."""
    from dgemm.jit import entry as entry_format
    return entry_format.pack(_entry(truth), secret)


def forged(victim: Truth, donor: Truth, secret: Optional[bytes] = None) -> bytes:
    """The donor's cubin under the victim's key, with a valid checksum (and an HMAC under
    `secret`): what anyone who can write the cache can make without knowing the secret."""
    from dgemm.jit import entry as entry_format
    return entry_format.pack(dataclasses.replace(_entry(donor), key=victim.key), secret)


def _prefix(flags: int, header_size: int) -> bytes:
    from dgemm.jit import entry as entry_format
    return _PREFIX.pack(entry_format.MAGIC, entry_format.FORMAT_VERSION, flags, header_size)


def crafted(header: bytes, cubin: bytes, signed: bool = False) -> bytes:
    """An entry with any header bytes but a valid checksum (and a random 'HMAC' when signed),
    so that only the header decides whether it is refused."""
    body = _prefix(1 if signed else 0, len(header)) + header + cubin
    blob = body + hashlib.sha256(body).digest()
    return blob + os.urandom(32) if signed else blob


def corrupted(kind: str, truth: Truth, other: Truth, rng: random.Random) -> bytes:
    """The true blob damaged one way."""
    blob = truth.blob
    header_size = _PREFIX.unpack_from(blob)[3]
    cubin = _entry(truth).cubin
    regions = {"bitflip-prefix": (0, _PREFIX.size),
               "bitflip-header": (_PREFIX.size, _PREFIX.size + header_size),
               "bitflip-cubin": (_PREFIX.size + header_size, len(blob) - 32),
               "bitflip-checksum": (len(blob) - 32, len(blob))}
    if kind in regions:
        damaged = bytearray(blob)
        damaged[rng.randrange(*regions[kind])] ^= 1 << rng.randrange(8)
        return bytes(damaged)
    if kind == "truncated":
        return blob[:rng.randrange(1, len(blob))]
    if kind == "padded":
        return blob + rng.randbytes(rng.randint(1, 64))
    if kind == "empty":
        return b""
    if kind == "garbage":
        return rng.randbytes(len(blob))
    if kind == "header-100k-brackets":
        return crafted(b"[" * 100_000, cubin)
    if kind == "header-not-object":
        return crafted(b'["key", "spec"]', cubin)
    if kind == "header-length-huge":
        return _prefix(0, 0xFFFFFFFF) + blob[_PREFIX.size:]
    if kind == "other-spec-blob":
        return other.blob
    raise ValueError(f"unknown corruption {kind!r}")


# ------------------------------------------------------------------------------------------------
# Fault families
# ------------------------------------------------------------------------------------------------
@family("sigkill", ("compile", "publish", "random", "compile+redis"), full_repeat=4, slow=True)
def sigkill_ranks(t: Trial, variant: str) -> None:
    """SIGKILL a rank while it compiles (holding its node's lock for the key and, with Redis,
    the cluster lease), while it publishes (temp file written, not yet renamed), or at a random
    point. The ranks queued behind it and those started after it serve the true cubin, with one
    compile per kernel among them (across both nodes with Redis)."""
    specs = t.specs(2)
    redis = t.redis() if variant.endswith("redis") else None
    lease = {"DGEMM_REMOTE_LEASE_TTL": t.mode.lease_ttl} if redis and t.mode.lease_ttl else {}
    environ = t.env(t.node("a"), redis, **lease)
    queued = []
    if variant == "random":
        victim = t.rank(environ, specs, role="victim")
        time.sleep(t.rng.uniform(0.0, 0.25))
    else:
        marker = t.dir / "victim.pid"
        victim = t.rank(dict(environ, DGEMM_TEST_PAUSE=f"{variant.split('+')[0]}:{FOREVER_S}",
                             DGEMM_TEST_PAUSE_MARKER=str(marker)), specs, role="victim")
        if not victim.wait_for(marker):
            t.check_rank(victim, specs)
            return
        queued = [t.rank(environ, specs, role="queued") for _ in range(2)]
        if redis:
            queued.append(t.rank(t.env(t.node("b"), redis, **lease), specs, role="other-node"))
        time.sleep(0.3)
    victim.kill()
    t.fault()
    survivors = queued + [t.rank(environ, specs, role="later") for _ in range(2)]
    for child in survivors:
        t.check_rank(child, specs)
    t.check_compiles(survivors, at_most=len(specs))


@family("concurrent", ("one-node", "two-nodes", "four-nodes"), full_repeat=3)
def concurrent_ranks(t: Trial, variant: str) -> None:
    """Many ranks start at the same instant on the same two kernels, on one node or spread over
    nodes (separate cache dirs) sharing one Redis: every rank serves the true cubin and each
    kernel is compiled exactly once, cluster-wide."""
    nodes = {"one-node": 1, "two-nodes": 2, "four-nodes": 4}[variant]
    specs = t.specs(2)
    redis = t.redis() if nodes > 1 else None
    start_at = time.time() + 1.0
    ranks = [t.rank(t.env(t.node(str(i % nodes)), redis), specs, role=f"rank{i}",
                    start_at=start_at) for i in range(t.mode.contenders)]
    t.fault(len(ranks))
    for child in ranks:
        t.check_rank(child, specs)
    t.check_compiles(ranks, at_most=len(specs))


# The commands that read every local entry; each runs on its own copy of a damaged cache.
_DISK_COMMANDS = {"verify": ("verify", "--no-progress"), "ls": ("ls",), "gc": ("gc",),
                  "export": ("export", "{dir}/out.tar", "--no-progress"), "stats": ("stats",)}


def _disk_commands(t: Trial, prepare: Callable[[Path], None], **extra) -> list:
    """Start every command of _DISK_COMMANDS, each on a node that `prepare(node)` damaged."""
    commands = []
    for name, command in _DISK_COMMANDS.items():
        node = t.node(f"cli-{name}")
        prepare(node)
        commands.append(t.cli(t.env(node, **extra), *(p.format(dir=t.dir) for p in command)))
    return commands


@family("corrupt-entry", ("bitflip-prefix", "bitflip-header", "bitflip-cubin",
                          "bitflip-checksum", "truncated", "padded", "empty", "garbage",
                          "header-100k-brackets", "header-not-object", "header-length-huge",
                          "other-spec-blob"), full_repeat=3)
def corrupt_entries(t: Trial, variant: str) -> None:
    """A damaged entry on disk under the kernel's key: the rank serves the true cubin (the bad
    entry is a miss, removed and rebuilt), and a dgemm-cache command over a copy of that cache
    (verify, ls, gc, export or stats) exits 0 or 1 without a traceback."""
    spec, other = t.specs(2)
    truth = t.lab.truth[spec]
    bad = corrupted(variant, truth, t.lab.truth[other], t.rng)

    def damage(node: Path) -> None:
        t.seed(node, [other])
        plant(entry_path(node, truth.key), bad)

    damage(t.node("rank"))
    t.fault()
    commands = _disk_commands(t, damage)
    t.check_rank(t.rank(t.env(t.node("rank")), [spec]), [spec])
    for command in commands:
        t.check_cli(command, exits={0, 1})


@family("secret", ("unsigned", "other-secret", "forged-unsigned", "forged-other-secret",
                   "header-100k-signed", "hmac-truncated"), full_repeat=3)
def unsigned_or_badly_signed(t: Trial, variant: str) -> None:
    """DGEMM_CACHE_SECRET is set and the disk holds an entry for the key that this secret did
    not sign (unsigned, another secret, another spec's cubin re-keyed, a crafted header, a cut
    HMAC): the rank serves the true cubin, and every command that reads the local entries
    exits 0 or 1 without a traceback."""
    spec, other = t.specs(2)
    truth, donor = t.lab.truth[spec], t.lab.truth[other]
    bad = {"unsigned": lambda: seal(truth, None),
           "other-secret": lambda: seal(truth, OTHER_SECRET),
           "forged-unsigned": lambda: forged(truth, donor),
           "forged-other-secret": lambda: forged(truth, donor, OTHER_SECRET),
           "header-100k-signed": lambda: crafted(b"[" * 100_000, _entry(truth).cubin, True),
           "hmac-truncated": lambda: seal(truth, SECRET.encode())[:-7]}[variant]()
    plant(entry_path(t.node("rank"), truth.key), bad)
    t.fault()
    commands = _disk_commands(t, lambda node: plant(entry_path(node, truth.key), bad),
                              DGEMM_CACHE_SECRET=SECRET)
    t.check_rank(t.rank(t.env(t.node("rank"), DGEMM_CACHE_SECRET=SECRET), [spec]), [spec])
    for command in commands:
        t.check_cli(command, exits={0, 1})


@family("special-file", ("fifo", "symlink-dev-zero", "sparse-4gib", "symlink-to-a-copy"),
        full_repeat=2, slow=True)
def special_files(t: Trial, variant: str) -> None:
    """The entry path is not a regular file of an entry's size: a FIFO (an open for reading
    blocks), a symlink to /dev/zero (endless), a sparse 4 GiB file, a symlink to a copy of the
    true entry. The rank serves the true cubin within its bound and its memory headroom,
    and every command that reads the local entries exits 0 or 1 in time without a
    traceback."""
    spec = t.specs(1)
    truth = t.lab.truth[spec[0]]

    def replace_entry(node: Path) -> None:
        path = entry_path(node, truth.key)
        if variant == "fifo":
            os.mkfifo(path)
        elif variant == "symlink-dev-zero":
            path.symlink_to("/dev/zero")
        elif variant == "sparse-4gib":
            with open(path, "wb") as handle:
                handle.truncate(4 << 30)
        else:
            copy = node.with_name(f"{node.name}-copy.kbin")
            copy.write_bytes(truth.blob)
            path.symlink_to(copy)

    replace_entry(t.node("rank"))
    t.fault()
    commands = _disk_commands(t, replace_entry)
    t.check_rank(t.rank(t.env(t.node("rank")), spec), spec)
    for command in commands:
        t.check_cli(command, exits={0, 1})


@family("foreign-dir", ("world-writable-root", "world-writable-shard", "planted-symlink",
                        "other-owner-root", "other-owner-shard"), full_repeat=2)
def foreign_directories(t: Trial, variant: str) -> None:
    """Another local user can write the cache (a directory writable by others, or owned by
    another uid: chown 65534, as root only) and has planted another spec's cubin under the
    victim's key with a valid checksum (keys are predictable; without a secret a checksum is
    all an entry carries). The rank must never run it: it serves the true cubin (falling back)
    or refuses with CacheDirError."""
    is_root = os.geteuid() == 0
    if variant.startswith("other-owner") and not is_root:
        t.skip("chown to another uid needs root")
        return
    spec, other = t.specs(2)
    truth = t.lab.truth[spec]
    node = t.node("victim")
    path = entry_path(node, truth.key)
    planted = forged(truth, t.lab.truth[other])
    if variant == "planted-symlink":
        target = t.dir / "attacker.kbin"
        target.write_bytes(planted)
        path.symlink_to(target)
        _give_to_attacker(target, is_root)
    else:
        path.write_bytes(planted)
        _give_to_attacker(path, is_root)
    shard, tree = path.parent, [node, node / "v1", path.parent]
    if variant == "world-writable-root":
        for directory in tree:
            directory.chmod(0o777)
    elif variant in ("world-writable-shard", "planted-symlink"):
        shard.chmod(0o777)
    elif variant == "other-owner-root":
        for directory in tree:
            os.chown(directory, NOBODY, NOBODY)
    else:
        os.chown(shard, NOBODY, NOBODY)
    t.fault()
    t.check_rank(t.rank(t.env(node), [spec]), [spec], allowed=("CacheDirError",))


def _give_to_attacker(path: Path, is_root: bool) -> None:
    if is_root:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)


def _redis_holding(t: Trial, specs: list, secret: Optional[bytes] = None) -> RedisServer:
    """A Redis to which some node has already published the true entries of `specs`."""
    redis = t.redis()
    for index in specs:
        publish(redis, t.lab.truth[index].key, seal(t.lab.truth[index], secret))
    return redis


@family("disk-full", ("miss", "miss-redis-holds", "hit"), full_repeat=3)
def full_disk(t: Trial, variant: str) -> None:
    """The disk takes no more bytes (RLIMIT_FSIZE of 4 KiB with SIGXFSZ ignored: every write
    past it fails with EFBIG, an entry is ~6 KiB): a kernel in hand, compiled here or
    downloaded from a Redis that holds it, is served although it cannot be published; a hit is
    served as ever. With Redis holding the kernels, nothing is compiled."""
    specs = t.specs(2)
    node = t.node("a")
    redis = _redis_holding(t, specs) if variant == "miss-redis-holds" else None
    if variant == "hit":
        t.seed(node, specs)
    t.fault()
    rank = t.rank(t.env(node, redis), specs, fsize=4096)
    t.check_rank(rank, specs)
    if redis:
        t.check_compiles([rank], at_most=0)


@family("read-only-dir", ("miss", "miss-redis-holds", "hit", "tmp-read-only"), full_repeat=2)
def read_only_dirs(t: Trial, variant: str) -> None:
    """The cache dir (or only its tmp/) cannot be written: mode 0500, and as root the rank drops
    CAP_DAC_OVERRIDE so that the mode binds it too. A hit is served; a miss is compiled (or
    downloaded from a Redis that holds it) and served from memory."""
    from dgemm.jit.tiers import DiskTier
    specs = t.specs(2)
    node = t.node("a")
    DiskTier(node).ensure_dirs()
    redis = _redis_holding(t, specs) if variant == "miss-redis-holds" else None
    if variant == "hit":
        t.seed(node, specs)
    if variant == "tmp-read-only":
        (node / "tmp").chmod(0o500)
    else:
        for directory in [node, *(p for p in node.rglob("*") if p.is_dir())]:
            directory.chmod(0o500)
    t.fault()
    rank = t.rank(t.env(node, redis), specs, drop_dac=True)
    t.check_rank(rank, specs)
    if redis:
        t.check_compiles([rank], at_most=0)


# The commands that talk to Redis, those that change nothing there first.
_REMOTE_COMMANDS = (("stats",), ("ls", "--remote"), ("verify", "--remote", "--dry-run",
                    "--no-progress"), ("push", "--no-progress"), ("pull", "--no-progress"),
                    ("sync", "--once"), ("export", "{dir}/out.tar", "--remote", "--no-progress"),
                    ("verify", "--remote", "--no-progress"))


def _remote_command(t: Trial) -> list:
    command = _REMOTE_COMMANDS[t.ordinal % len(_REMOTE_COMMANDS)]
    return [part.format(dir=t.dir) for part in command]


@family("redis-fault", ("killed-before", "killed-mid-compile", "stopped-mid-compile",
                        "flushed-mid-compile", "restarted-mid-compile", "full-holds-kernels",
                        "full-from-start", "fake-ok", "fake-one", "fake-nil", "fake-mixed"),
        full_repeat=2)
def redis_faults(t: Trial, variant: str) -> None:
    """Redis dies, stops (SIGSTOP), forgets (FLUSHALL), restarts empty, fills up (maxmemory,
    noeviction), or is a server that speaks its protocol but is not Redis. Every rank on every
    node serves the true cubin within its bound (compiling locally when Redis is unusable) and
    a dgemm-cache command exits 0, 1 or 3 without a traceback. A full Redis that holds the
    kernels still serves them: a node downloads instead of compiling."""
    specs = t.specs(2)
    if variant.startswith("fake"):
        _fake_redis(t, variant, specs)
    elif variant.startswith("full"):
        _full_redis(t, variant, specs)
    elif variant == "killed-before":
        redis = t.redis()
        redis.kill()
        _nodes_serve_and_a_command_answers(t, redis, specs)
    else:
        _fault_mid_compile(t, variant, specs)


def _nodes_serve_and_a_command_answers(t: Trial, server: RedisServer | NotRedis,
                                       specs: list) -> None:
    """The fault is in place: a rank on node a, then one on node b, serves the true cubins,
    and a command that talks to `server` answers."""
    t.fault()
    for node in ("a", "b"):
        t.check_rank(t.rank(t.env(t.node(node), server), specs), specs)
    _check_remote_command(t, server)


def _check_remote_command(t: Trial, server: RedisServer | NotRedis) -> None:
    """A dgemm-cache command that talks to `server` exits 0, 1 or 3 (Redis unusable) without a
    traceback."""
    t.check_cli(t.cli(t.env(t.node("a"), server), *_remote_command(t)), exits={0, 1, 3})


def _fault_mid_compile(t: Trial, variant: str, specs: list) -> None:
    """An owner on node a compiles (paused 2 s at the compile hook, holding the lease), a waiter
    on node b waits for it; then the fault; then a late rank on node c."""
    redis = t.redis()
    marker = t.dir / "owner.pid"
    owner = t.rank(t.env(t.node("a"), redis, DGEMM_TEST_PAUSE="compile:2",
                         DGEMM_TEST_PAUSE_MARKER=marker), specs, role="owner")
    ranks = [owner]
    if owner.wait_for(marker):
        ranks.append(t.rank(t.env(t.node("b"), redis), specs, role="waiter"))
        time.sleep(0.3)
    {"killed-mid-compile": redis.kill, "stopped-mid-compile": redis.pause,
     "flushed-mid-compile": lambda: redis.client().flushall(),
     "restarted-mid-compile": redis.restart}[variant]()
    t.fault()
    for child in ranks:
        t.check_rank(child, specs)
    t.check_rank(t.rank(t.env(t.node("c"), redis), specs, role="late"), specs)
    _check_remote_command(t, redis)
    if variant == "stopped-mid-compile":
        redis.resume()


def _full_redis(t: Trial, variant: str, specs: list) -> None:
    if variant == "full-holds-kernels":
        redis = _redis_holding(t, specs)
        redis.fill_up()
        t.fault()
        ranks = [t.rank(t.env(t.node(node), redis), specs) for node in ("a", "b")]
        for child in ranks:
            t.check_rank(child, specs)
        t.check_compiles(ranks, at_most=0)
        _check_remote_command(t, redis)
    else:
        redis = t.redis()
        redis.fill_up()
        _nodes_serve_and_a_command_answers(t, redis, specs)


_FAKE_REPLIES = {"fake-ok": [b"+OK\r\n"], "fake-one": [b":1\r\n"], "fake-nil": [b"$-1\r\n"],
                 "fake-mixed": [b"+OK\r\n", b":1\r\n", b"*0\r\n", b"$2\r\nhi\r\n"]}


def _fake_redis(t: Trial, variant: str, specs: list) -> None:
    _nodes_serve_and_a_command_answers(t, t.fake_redis(_FAKE_REPLIES[variant]), specs)


@family("redis-data", ("bitflip", "truncated", "header-100k-brackets", "other-spec-blob",
                       "forged-with-secret", "unsigned-with-secret", "meta-value-list",
                       "meta-value-not-json", "meta-not-a-hash", "index-not-a-zset",
                       "entry-not-a-string"), full_repeat=2)
def redis_data(t: Trial, variant: str) -> None:
    """Redis holds a bad value under the cache's names: a damaged or forged blob, or bookkeeping
    of the wrong shape or type. A rank on a fresh node serves the true cubin (a refused blob is
    deleted and rebuilt), and a command that lists, verifies or moves Redis's content exits 0,
    1 or 3 without a traceback."""
    from cache_service.namespace import Namespace
    spec, other = t.specs(2)
    truth, donor = t.lab.truth[spec], t.lab.truth[other]
    secret = SECRET.encode() if variant.endswith("with-secret") else None
    redis = _redis_holding(t, [spec, other], secret)
    client, names = redis.client(), Namespace()
    bad_blob = {"bitflip": lambda: corrupted("bitflip-cubin", truth, donor, t.rng),
                "truncated": lambda: corrupted("truncated", truth, donor, t.rng),
                "header-100k-brackets": lambda: corrupted("header-100k-brackets", truth, donor,
                                                          t.rng),
                "other-spec-blob": lambda: donor.blob,
                "forged-with-secret": lambda: forged(truth, donor, OTHER_SECRET),
                "unsigned-with-secret": lambda: truth.blob}.get(variant)
    if bad_blob is not None:
        client.set(names.entry(truth.key), bad_blob())
    elif variant == "meta-value-list":
        client.hset(names.meta, truth.key, "[]")
    elif variant == "meta-value-not-json":
        client.hset(names.meta, truth.key, "{")
    elif variant == "meta-not-a-hash":
        client.delete(names.meta)
        client.set(names.meta, "x")
    elif variant == "index-not-a-zset":
        client.delete(names.index)
        client.set(names.index, "x")
    else:
        client.delete(names.entry(truth.key))
        client.hset(names.entry(truth.key), "field", "value")
    t.fault()
    extra = {"DGEMM_CACHE_SECRET": SECRET} if secret else {}
    # One after the other, those that only read first: a download of a refused blob deletes it.
    for index, command in enumerate(_REMOTE_COMMANDS):
        argv = [part.format(dir=t.dir) for part in command]
        t.check_cli(t.cli(t.env(t.node(f"cli-{index}"), redis, **extra), *argv),
                    exits={0, 1, 3})
    t.check_rank(t.rank(t.env(t.node("rank"), redis, **extra), [spec]), [spec])


@family("stall", ("dead-owner", "stopped-owner", "publish-timed-out", "stopped-lock-holder"),
        full_repeat=2, slow=True)
def stalled_owners(t: Trial, variant: str) -> None:
    """The rank that holds a key's lease or node lock stops making progress: killed or stopped
    while compiling, or its publish timed out (Redis stopped for longer than
    DGEMM_REMOTE_TIMEOUT) so its lease is left behind; or it holds its node's lock, stopped,
    while Redis already has the kernel. Every other rank serves the true cubin within its bound
    (max s to serve shows how long it waited; quick mode sets a lease TTL of 8 s, full mode keeps
    the default)."""
    spec = t.specs(1)
    redis = t.redis()
    lease = {"DGEMM_REMOTE_LEASE_TTL": t.mode.lease_ttl} if t.mode.lease_ttl else {}
    marker = t.dir / "owner.pid"
    pause_s = 5 if variant == "publish-timed-out" else FOREVER_S
    owner = t.rank(t.env(t.node("a"), redis, DGEMM_TEST_PAUSE=f"compile:{pause_s}",
                         DGEMM_TEST_PAUSE_MARKER=marker, **lease), spec, role="owner")
    if not owner.wait_for(marker):
        t.check_rank(owner, spec)
        return
    if variant != "publish-timed-out":
        t.fault()
    if variant == "dead-owner":
        owner.kill()
    elif variant == "stopped-owner":
        owner.signal(signal.SIGSTOP)
    elif variant == "publish-timed-out":
        redis.pause()
        if owner.exitcode is None:
            t.fault()
        else:                           # the probe was starved for the whole pause
            t.notes.append("note: the owner ended before Redis was stopped; no fault")
        t.check_rank(owner, spec)       # served from its own compile; the publish timed out
        redis.resume()
    else:
        owner.signal(signal.SIGSTOP)
        publish(redis, t.lab.truth[spec[0]].key, t.lab.truth[spec[0]].blob)
        t.check_rank(t.rank(t.env(t.node("a"), redis, **lease), spec, role="same-node"), spec)
    t.check_rank(t.rank(t.env(t.node("b"), redis, **lease), spec, role="other-node"), spec)
    owner.kill()


# variant: (variable, value, exit statuses dgemm-cache may give)
_BAD_SETTINGS = {
    "remote-timeout-inf": ("DGEMM_REMOTE_TIMEOUT", "inf", {2}),
    "remote-timeout-1e999": ("DGEMM_REMOTE_TIMEOUT", "1e999", {2}),
    "lease-ttl-inf": ("DGEMM_REMOTE_LEASE_TTL", "inf", {0, 2}),
    "remote-ttl-inf": ("DGEMM_REMOTE_TTL", "inf", {0, 2}),
    "fail-ttl-inf": ("DGEMM_REMOTE_FAIL_TTL", "inf", {0, 2}),
    "remote-wait-inf": ("DGEMM_REMOTE_WAIT", "inf", {0, 2}),
    "lock-timeout-inf": ("DGEMM_LOCK_TIMEOUT", "inf", {0, 2}),
    "secret-file-fifo": ("DGEMM_CACHE_SECRET_FILE", "{dir}/secret.fifo", {2}),
    "secret-file-dev-zero": ("DGEMM_CACHE_SECRET_FILE", "/dev/zero", {2}),
    "secret-file-directory": ("DGEMM_CACHE_SECRET_FILE", "{dir}", {2}),
}


@family("bad-setting", tuple(_BAD_SETTINGS), slow=True)
def bad_settings(t: Trial, variant: str) -> None:
    """A DGEMM_* variable holds a value that cannot work (a non-finite number of seconds, a
    secret file that is a FIFO, endless, or a directory): a rank serves the true cubin or
    refuses with ConfigError, in time; `dgemm-cache stats` exits 2 (bad setting) or, for a
    value it may accept, 0, in time and without a traceback."""
    variable, value, exits = _BAD_SETTINGS[variant]
    value = value.format(dir=t.dir)
    if variant == "secret-file-fifo":
        os.mkfifo(value)
    redis = t.redis()
    spec = t.specs(1)
    t.fault()
    command = t.cli(t.env(t.node("cli"), redis, **{variable: value}), "stats")
    t.check_rank(t.rank(t.env(t.node("rank"), redis, **{variable: value}), spec), spec,
                 allowed=("ConfigError",))
    t.check_cli(command, exits=exits)


def _write_manifest(t: Trial, text: str) -> Path:
    path = t.dir / "manifest.json"
    path.write_text(text)
    return path


def _bundle(t: Trial, manifest: bytes, members: dict) -> Path:
    """A tar file shaped like a dgemm bundle: manifest.json and entries/<key>.kbin members."""
    path = t.dir / "bundle.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in [("manifest.json", manifest), *members.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _bundle_manifest(entries) -> bytes:
    return json.dumps({"format": "dgemm-bundle", "version": 1, "created": time.time(),
                       "entries": entries}).encode()


def _truncated_bundle(t: Trial) -> Path:
    truth = t.lab.truth[t.specs(1)[0]]
    listed = [{"key": truth.key, "sha256": hashlib.sha256(truth.blob).hexdigest(),
               "bytes": len(truth.blob), "arch": "sm_90a", "compiler": "?"}]
    path = _bundle(t, _bundle_manifest(listed), {f"entries/{truth.key}.kbin": truth.blob})
    data = path.read_bytes()
    path.write_bytes(data[:t.rng.randrange(600, len(data) // 2)])
    return path


def _bad_entry_bundle(t: Trial) -> Path:
    truth = t.lab.truth[t.specs(1)[0]]
    blob = crafted(b"[" * 100_000, _entry(truth).cubin)
    listed = [{"key": truth.key, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob),
               "arch": "sm_90a", "compiler": "?"}]
    return _bundle(t, _bundle_manifest(listed), {f"entries/{truth.key}.kbin": blob})


def _export_target(t: Trial, variant: str) -> Path:
    path = t.dir / "target"
    if variant == "export-onto-fifo":
        os.mkfifo(path)
    elif variant == "export-onto-symlink":
        (t.dir / "precious.txt").write_text("not a bundle\n")
        path.symlink_to(t.dir / "precious.txt")
    else:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))     # like /dev/null
    return path


_NESTED = "[" * 100_000 + "]" * 100_000


@family("cli-input", ("manifest-empty-object", "manifest-dense-list", "manifest-nested",
                      "manifest-wrong-types", "m-range-huge", "bundle-truncated",
                      "bundle-entries-not-a-list", "bundle-manifest-nested",
                      "bundle-entry-key-not-a-string", "bundle-bad-entry", "export-onto-fifo",
                      "export-onto-symlink", "export-onto-device", "gc-stale-after-0"))
def malformed_inputs(t: Trial, variant: str) -> None:
    """Malformed manifests, M ranges, bundles and arguments: dgemm-cache exits 2 (a bad argument
    or a malformed file; 1 for a well-formed bundle with a bad entry; 0 or 2 for an empty
    manifest) in time, without a traceback; `export` never replaces a FIFO, a symlink or a
    device node it was pointed at."""
    node = t.node("a")
    t.seed(node, t.specs(1))
    environ = t.env(node)
    target, exits = None, {2}
    if variant == "manifest-empty-object":
        argv, exits = ["prewarm", "--manifest", _write_manifest(t, "{}"), "--no-progress"], {0, 2}
    elif variant == "manifest-dense-list":
        argv = ["prewarm", "--manifest", _write_manifest(t, '{"dense": []}'), "--no-progress"]
    elif variant == "manifest-nested":
        argv = ["prewarm", "--manifest", _write_manifest(t, _NESTED), "--no-progress"]
    elif variant == "manifest-wrong-types":
        argv = ["prewarm", "--manifest", _write_manifest(
            t, '{"dense": {"m": [128], "nk": [[256, 512]]}, "grouped_masked": 7}'),
            "--no-progress"]
    elif variant == "m-range-huge":
        argv = ["prewarm", "--manifest", _write_manifest(t, '{"dense": {"nk": [[256, 512]]}}'),
                "--m-range", "1-100000000", "--no-progress"]
    elif variant == "bundle-truncated":
        argv = ["import", _truncated_bundle(t)]
    elif variant == "bundle-entries-not-a-list":
        argv = ["import", _bundle(t, _bundle_manifest("x"), {})]
    elif variant == "bundle-manifest-nested":
        argv = ["import", _bundle(t, _NESTED.encode(), {})]
    elif variant == "bundle-entry-key-not-a-string":
        argv = ["import", _bundle(t, _bundle_manifest([{"key": 5, "sha256": None}]), {})]
    elif variant == "bundle-bad-entry":
        argv, exits = ["import", _bad_entry_bundle(t)], {1}
    elif variant.startswith("export-onto"):
        if variant == "export-onto-device" and os.geteuid() != 0:
            t.skip("mknod needs root")
            return
        target = _export_target(t, variant)
        argv = ["export", target, "--no-progress"]
    else:
        argv = ["gc", "--stale-after", "0"]
    before = identity(target) if target else None
    precious = identity(t.dir / "precious.txt")
    t.fault()
    t.check_cli(t.cli(environ, *argv), exits=exits)
    if target is not None:
        t.check_kept(target, before, "the export target")
        t.check_kept(t.dir / "precious.txt", precious, "the symlink's target")


@family("gc", ("publish-in-flight", "not-a-cache", "foreign-files-in-cache"), full_repeat=2)
def gc_races(t: Trial, variant: str) -> None:
    """`dgemm-cache gc` next to live ranks and other people's files: a publish in flight (its
    temp file aged past --stale-after) completes and its rank serves the true cubin; gc over a
    directory that is not a dgemm cache (say ~, with its own tmp/ and locks/) refuses with exit
    2 and deletes nothing; gc over a cache deletes nothing in tmp/ or locks/ that is not
    dgemm's."""
    node = t.node("a")
    if variant == "publish-in-flight":
        spec = t.specs(1)
        marker = t.dir / "rank.pid"
        # Paused long enough for gc to run meanwhile (gc takes about a second).
        rank = t.rank(t.env(node, DGEMM_TEST_PAUSE="publish:8", DGEMM_TEST_PAUSE_MARKER=marker),
                      spec)
        if rank.wait_for(marker):
            for temp in (node / "tmp").iterdir():
                os.utime(temp, (time.time() - 7200, time.time() - 7200))
            t.fault()
            t.check_cli(t.cli(t.env(node), "gc"), exits={0, 1})
        t.check_rank(rank, spec)
        return
    if variant == "not-a-cache":
        files = [node / "tmp" / "thesis.tex", node / "locks" / "door.txt", node / "notes.txt"]
        argv, exits = ["gc", "--cache-dir", node], {2}
    else:
        t.seed(node, t.specs(2))
        files = [node / "tmp" / "thesis.tex", node / "locks" / "notes.txt"]
        argv, exits = ["gc"], {0, 1}
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("someone's work\n")
        os.utime(path, (time.time() - 30 * 86400, time.time() - 30 * 86400))
    before = {path: identity(path) for path in files}
    t.fault()
    t.check_cli(t.cli(t.env(node), *argv), exits=exits)
    for path in files:
        t.check_kept(path, before[path], "the file")


@family("prewarm-kill", ("workers-compiling",), full_repeat=2, slow=True)
def killed_prewarm(t: Trial, variant: str) -> None:
    """SIGKILL a real `dgemm-cache prewarm` while its worker processes compile: within
    ORPHAN_GRACE_S no process of it is left alive (a worker would hold a key's lock and ~300 MB
    for ever), and a rank started afterwards serves the true cubins."""
    specs = t.specs(2)
    node = t.node("a")
    manifest = {"dense": {"m": [PROBLEM_M], "nk": [list(t.lab.truth[i].problem[1:])
                                                   for i in specs]}}
    marker = t.dir / "worker.pid"
    environ = t.env(node, DGEMM_TEST_PAUSE=f"compile:{FOREVER_S}", DGEMM_TEST_PAUSE_MARKER=marker)
    log = open(t.dir / "prewarm.log", "wb")
    with log:
        prewarm = subprocess.Popen(
            [sys.executable, "-m", "dgemm.cli", "prewarm", "--manifest",
             _write_manifest(t, json.dumps(manifest)), "--jobs", "2", "--no-progress"],
            env=environ, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + t.mode.timeout_s
        while not (marker.exists() and marker.stat().st_size) and prewarm.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        if not marker.exists():
            t.problem("crashes", f"prewarm never reached a compile (exit {prewarm.poll()})")
            return
        prewarm.kill()
        prewarm.wait()
        t.fault()
        deadline = time.monotonic() + ORPHAN_GRACE_S
        while _session_members(prewarm.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in _session_members(prewarm.pid):
            t.problem("hangs", f"prewarm process {pid} still alive {ORPHAN_GRACE_S:g} s after "
                               f"the prewarm was killed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(prewarm.pid, signal.SIGKILL)     # the orphans, once counted
    t.check_rank(t.rank(t.env(node), specs, role="after"), specs)


def _session_members(session: int) -> list:
    """Live processes of a session (what start_new_session gave the prewarm and its workers)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":    # fields: state ppid pgrp session
            members.append(int(entry.name))
    return members


# ------------------------------------------------------------------------------------------------
# Running and reporting
# ------------------------------------------------------------------------------------------------
def run_trial(lab: Lab, family_: Family, variant: str, ordinal: int) -> dict:
    trial = Trial(lab, family_.name, variant, ordinal)
    started = time.monotonic()
    try:
        family_.run(trial, variant)
    except Exception as error:          # the probe's own trouble, not the cache's: say so
        trial.notes.append(f"probe error: {type(error).__name__}: {error}")
        trial.tally.probe_errors += 1
    finally:
        trial.close()
    if not (trial.tally.failures or trial.tally.skipped or trial.tally.probe_errors):
        trial.tally.ok = 1
    return {"family": family_.name, "variant": variant, "ordinal": ordinal,
            "seconds": round(time.monotonic() - started, 2),
            "tally": dataclasses.asdict(trial.tally), "notes": trial.notes}


def format_table(rows: dict, total: Tally) -> str:
    titles = ["family", *(title for _, title in COLUMNS)]
    widths = [max(len(name) for name in [*rows, titles[0]])]
    widths += [max(len(title), 6) for title in titles[1:]]
    lines = [" | ".join(t.ljust(w) for t, w in zip(titles, widths)),
             "-+-".join("-" * w for w in widths)]
    for name, tally in [*rows.items(), ("total", total)]:
        cells = [name.ljust(widths[0])]
        for (field, _), width in zip(COLUMNS, widths[1:]):
            value = getattr(tally, field)
            cells.append((f"{value:.1f}" if field == "max_serve_s" else str(value)).rjust(width))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def format_findings(trials: list) -> str:
    lines = []
    for record in trials:
        for note in record["notes"]:
            lines.append(f"  {record['family']}/{record['variant']}#{record['ordinal']}: "
                         f"{note[:300]}")
    return "\n".join(["findings:", *lines]) if lines else "findings: none"


def run_all(lab: Lab, families: list) -> list:
    """Every trial of `families`, slow families first, WORKERS at a time."""
    plan = [(f, variant, ordinal) for f in sorted(families, key=lambda f: not f.slow)
            for ordinal, variant in enumerate(f.plan(lab.mode))]
    with concurrent.futures.ThreadPoolExecutor(lab.workers) as pool:
        return list(pool.map(lambda job: run_trial(lab, *job), plan))


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="each variant once, 30 s bound per process (CI); default: full")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    parser.add_argument("--family", action="append", metavar="NAME",
                        choices=[f.name for f in FAMILIES],
                        help="run only this family (repeatable)")
    parser.add_argument("--seed", type=int, default=15, help="seed of every random choice")
    parser.add_argument("--workers", type=int, default=32, help="trials run at once")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args(argv)
    if REDIS_SERVER is None:
        print("cache_probe: redis-server not found on PATH; install it (apt-get install "
              "redis-server)", file=sys.stderr)
        return 2
    try:
        import dgemm
    except ImportError as error:
        print(f"cache_probe: cannot import dgemm ({error}); run from a checkout with "
              f"PYTHONPATH=$PWD", file=sys.stderr)
        return 2
    try:
        import redis_server  # noqa: F401
    except ImportError as error:
        print(f"cache_probe: cannot import tests/redis_server.py ({error}); it needs redis-py "
              f"and pytest (the test extra of pyproject.toml)",
              file=sys.stderr)
        return 2

    os.umask(0o022)         # the cache dirs the probe makes are never writable by others
    mode = QUICK if args.quick else FULL
    families = [f for f in FAMILIES if not args.family or f.name in args.family]
    started = time.monotonic()
    lab = Lab(mode, args.seed, args.workers)
    try:
        lab.compile_truth()
        trials = run_all(lab, families)
    finally:
        lab.close(args.keep)
    elapsed = time.monotonic() - started

    rows, total = {f.name: Tally() for f in families}, Tally()
    for record in trials:
        tally = Tally(**record["tally"])
        rows[record["family"]].add(tally)
        total.add(tally)
    clean = total.failures == 0 and total.probe_errors == 0
    where = Path(dgemm.__file__).parent
    print(f"dgemm cache probe, {mode.name} mode: {total.trials} trials in {elapsed:.0f} s; "
          f"dgemm from {where}; {'root' if os.geteuid() == 0 else 'not root'}")
    print(format_table(rows, total))
    if total.skipped or total.probe_errors:
        print(f"{total.skipped} trials skipped, {total.probe_errors} probe errors (see below)")
    print("\n" + format_findings(trials))
    if args.keep:
        print(f"\nwork directory kept: {lab.root}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "mode": mode.name, "seconds": round(elapsed, 1), "dgemm": str(where),
            "root": os.geteuid() == 0, "clean": clean, "totals": dataclasses.asdict(total),
            "families": {name: dataclasses.asdict(tally) for name, tally in rows.items()},
            "trials": trials}, indent=1))
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
