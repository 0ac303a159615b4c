"""Compile specs in worker processes (prewarm's pool, also used by bench/ to precompile), and
stop them at once when asked.

Each spec goes through `dgemm.jit.ensure_compiled_outcome` in a spawned worker, so a compiler
crash costs one outcome rather than the job, and the job process keeps no kernels in memory.
The workers die with the job process, even when it is SIGKILLed (Linux's parent-death signal,
and a watchdog thread in each worker elsewhere). `StopSignals` turns SIGINT and SIGTERM into
an event; when it is set, `compile_all` cancels what has not started, SIGKILLs the workers
(a compile inside NVRTC is C code that nothing gentler interrupts) and returns the outcomes of
the specs that finished, so the caller can still print its report.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

from dgemm.kernels.spec import KernelSpec      # not dgemm.heuristics: that imports torch
from dgemm.progress import Progress

_STOP_POLL_S = 0.2          # how often the job looks at the stop event while kernels compile
_KILL_WAIT_S = 5.0          # longest wait for a SIGKILLed worker to be reaped
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Where the walk found the kernel -> the status the prewarm report gives it.
_STATUS = {"compiled": "compiled", "remote": "downloaded", "disk": "cached", "memory": "cached"}


class StopSignals:
    """While entered, SIGINT and SIGTERM set `event` (the first signal is remembered in
    `signum`) instead of raising KeyboardInterrupt into the pool's bookkeeping; the previous
    handlers come back on exit. Outside the main thread, where Python cannot take signals, it
    installs nothing."""

    def __init__(self):
        self.event = threading.Event()
        self.signum: Optional[int] = None
        self._previous: dict = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
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


def compile_all(specs: list[KernelSpec], jobs: int, progress: Progress,
                stop: Optional[threading.Event] = None,
                on_outcome: Optional[Callable[[dict], None]] = None,
                verbose: bool = False) -> list[dict]:
    """One outcome dict per finished spec (see `outcome`), in the order the specs finish.
    Even one job uses a worker process. When `stop` is set, pending specs are cancelled and
    the workers killed mid-compile; the outcomes of the specs that finished are returned.
    `on_outcome` is called with each outcome as it arrives; `verbose` keeps the workers'
    remote-tier warnings (without it the caller reports the remote cache once)."""
    outcomes = []
    tally = {"compiled": 0, "cached": 0, "downloaded": 0, "failed": 0}
    stop = stop or threading.Event()
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
            pending = {pool.submit(compile_one, spec): spec for spec in specs}
        while pending and not stop.is_set():
            done, _ = concurrent.futures.wait(pending, timeout=_STOP_POLL_S,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                result = _result(future, pending.pop(future))
                outcomes.append(result)
                tally[result["status"]] += 1
                progress.advance(" ".join(f"{name} {n}" for name, n in tally.items()))
                if on_outcome is not None:
                    on_outcome(result)
    finally:
        if pending:                 # stopped (or an exception): do not wait for the rest
            _stop_pool(pool, set(multiprocessing.active_children()) - before)
        else:
            pool.shutdown(wait=True)
    return outcomes


def outcome(spec: KernelSpec, status: str, seconds: float, compile_seconds: float,
            key: Optional[str] = None, error: Optional[str] = None,
            tier: Optional[str] = None) -> dict:
    """What happened to one spec: status compiled | cached | downloaded | failed; `tier` is
    the walk's answer (memory, disk, remote, compiled); `remote` is filled in by the caller's
    end-of-job check of the remote cache."""
    return {"spec": spec, "key": key, "status": status, "tier": tier,
            "seconds": round(seconds, 3), "compile_seconds": round(compile_seconds, 3),
            "error": error, "remote": None}


def compile_one(spec: KernelSpec) -> dict:
    """Ensure one spec is in the cache; runs in a pool worker. Never raises: a failure becomes
    an outcome, so one bad kernel cannot take the rest of the job down."""
    from dgemm import jit          # imported here: the job process never needs torch

    started = time.perf_counter()
    try:
        walked = jit.ensure_compiled_outcome(spec)
    except Exception as exc:
        message, log = f"{type(exc).__name__}: {exc}", getattr(exc, "log", "")
        if log and log not in message:
            message += "\n" + log
        return outcome(spec, "failed", time.perf_counter() - started, 0.0, error=message)
    return outcome(spec, _STATUS[walked.source], time.perf_counter() - started,
                   walked.compile_seconds, key=walked.key, tier=walked.source)


def _result(future: concurrent.futures.Future, spec: KernelSpec) -> dict:
    try:
        return future.result()
    except Exception as exc:          # the worker process itself died (e.g. a crash)
        return outcome(spec, "failed", 0.0, 0.0,
                       error=f"worker process failed: {type(exc).__name__}: {exc}")


def _stop_pool(pool, workers: set) -> None:
    """Cancel what has not started and end the workers now, with SIGKILL: they take no stop
    signal (see `init_worker`). The pool cancels its pending futures itself, told before any
    worker dies: a future cancelled here could still be failed by the pool when it sees a
    worker gone, which CPython 3.11 answers with an InvalidStateError traceback from its
    manager thread."""
    pool.shutdown(wait=False, cancel_futures=True)
    for pid in _stopped_tree([worker.pid for worker in workers]):
        _signal(pid, signal.SIGKILL)
    for worker in workers:
        worker.join(_KILL_WAIT_S)


def _stopped_tree(roots: list) -> list:
    """`roots` and all their descendants (an nvcc a worker runs, and its cicc and ptxas),
    each SIGSTOPped as it is found so that none can start another after the walk has passed
    it. Killing only the workers would leave a running nvcc behind when the job alone got
    the signal (`kill PID`, a container runtime), not its whole process group."""
    found, frontier = [], list(roots)
    while frontier:
        for pid in frontier:
            _signal(pid, signal.SIGSTOP)
        found += frontier
        frontier = [child for pid in frontier for child in _children(pid)
                    if child not in found]
    return found


def _children(pid: int) -> list:
    """pid's child processes, from Linux's /proc (empty elsewhere, or when it has ended)."""
    children = []
    try:
        for thread in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{thread}/children") as listing:
                children += [int(child) for child in listing.read().split()]
    except OSError:
        pass
    return children


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass                        # already gone


@contextlib.contextmanager
def _stop_signals_blocked():
    """SIGINT and SIGTERM held back (not lost: delivered when this ends) while the pool starts
    its workers, which inherit the blocked mask: a Ctrl-C sent to the whole process group (a
    terminal, systemd) cannot kill a worker still importing dgemm, which the pool would
    report as failed kernels. Each worker lets them in once `init_worker` has disarmed them."""
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
    terminal sends to every process of the job) must not raise into a compile or kill a
    worker before the job has stopped the pool. No-op handlers rather than SIG_IGN, so that an
    nvcc this worker starts gets the default actions again and dies with the Ctrl-C."""
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
