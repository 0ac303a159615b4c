"""Walk the tiers for a spec: memory -> disk -> [per-key file lock, disk again] -> remote
single flight or compile -> publish to disk and memory. GPU-free: prewarm hosts call it too.

    ensure_compiled_outcome(spec) -> Outcome   key, where the entry came from, compile seconds
    ensure_compiled(spec) -> key               the same walk, for callers that need the key only
    get_entry(spec) -> Entry                   the same walk, for loaders that need the cubin

Each call reads `env.Settings` once at its start (the secret file included) and hands it down;
tiers verify what they read exactly once and hand up the Entry, and a fresh compile is sealed
and published without being verified again.

Only the holder of a key's node-local lock compiles or talks to the remote tier for that key, so
a node compiles a kernel once however many ranks ask, and Redis load scales with nodes. No
process-wide lock is held across a compile, a disk wait or a remote wait: threads asking for
different keys never queue behind each other; threads asking for the same key queue on its
file lock. A waiter looks for the entry on disk (every _DISK_POLL_S) and in the remote tier
(every _REMOTE_POLL_S) while it waits, so a stopped or slow holder delays nobody once the
kernel exists somewhere.

The disk tier is an accelerator, never a requirement: when the cache directory cannot be
written (full, read-only, not private) or its locks cannot be taken, the walk warns once and
serves the kernel it has in hand from memory (without the node lock, at worst a duplicate
compile).

A spec is any object with `to_json()` (canonical), `arch` and what `source.render` and the
compilers use (`header`, `cpp_instance()`, `plan_checks()`); its class or module defines FORMAT_VERSION (see
`key.spec_format`).
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Optional

import filelock

from . import compiler as compiler_module
from . import entry as entry_format
from . import env, key as key_module, remote, source, state, stats
from .entry import Entry
from .env import Settings
from .errors import CacheDirError, CompileLockTimeout, MissingKernelError
from .logs import logger, warning_once
from .tiers import DiskTier, MemoryTier, disk_tier

MEMORY, DISK, REMOTE, COMPILED = "memory", "disk", "remote", "compiled"

_DISK_POLL_S = 0.5      # how often a process waiting for a key's lock looks at the disk
_REMOTE_POLL_S = 1.0    # ... and at the remote tier

_memory = MemoryTier(state.table("jit.memory_tier"))


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one walk did for one spec."""
    key: str
    source: str                  # MEMORY | DISK | REMOTE | COMPILED: the tier that answered
    entry: Entry                 # verified (or built here), with its blob
    compile_seconds: float = 0.0  # this process's compile time; 0.0 unless source == COMPILED


def ensure_compiled_outcome(spec, settings: Optional[Settings] = None) -> Outcome:
    """Make sure some tier holds the kernel for `spec` and say where it came from. Never
    touches a GPU. `settings` defaults to `Settings.from_env()`, read once here."""
    settings = settings or Settings.from_env()
    compiler = compiler_module.get_compiler(settings.compiler, settings.debug)
    rendered = source.render(spec)
    key = key_module.key(spec, compiler, rendered)
    started = time.perf_counter()

    entry = _memory.get(key)
    if entry is not None:
        stats.incr("memory_hits")
        return Outcome(key, MEMORY, entry)

    disk = disk_tier(settings.cache_dir, settings.secret)
    entry = disk.get(key)
    if entry is not None:
        stats.incr("disk_hits")
        _debug("disk hit", key, started)
        outcome = Outcome(key, DISK, entry)
    elif settings.disable_jit:
        outcome = _fetch_without_compiling(spec, key, disk, settings)
    else:
        outcome = _build_under_lock(spec, key, compiler, rendered, disk, settings)
    _memory.put(outcome.entry)
    return outcome


def ensure_compiled(spec, settings: Optional[Settings] = None) -> str:
    """Make sure some tier holds the kernel for `spec`; return its key. Never touches a GPU."""
    return ensure_compiled_outcome(spec, settings).key


def get_entry(spec, settings: Optional[Settings] = None) -> Entry:
    """The verified entry (cubin, symbol, ...) for `spec`, compiling it if needed."""
    return ensure_compiled_outcome(spec, settings).entry


# ------------------------------------------------------------------------------------------------
def _build_under_lock(spec, key, compiler, rendered, disk: DiskTier,
                      settings: Settings) -> Outcome:
    lock, found = _take_node_lock(key, disk, settings)
    if found is not None:
        return found
    try:
        if lock is not None:
            # Another process may have published the entry while we waited for the lock.
            entry = disk.get(key)
            if entry is not None:
                stats.incr("disk_hits")
                return Outcome(key, DISK, entry)
        return _download_or_compile(spec, key, compiler, rendered, disk, settings)
    finally:
        if lock is not None:
            lock.release()


def _download_or_compile(spec, key, compiler, rendered, disk: DiskTier,
                         settings: Settings) -> Outcome:
    started = time.perf_counter()

    def build() -> Entry:
        return _compile(spec, key, compiler, rendered, settings.secret)

    tier = remote.tier_for(settings)
    if tier is None:
        entry, built = build(), True
    else:
        entry, built = tier.single_flight(key, build)
    _publish_quietly(disk, entry)
    _debug("built and published" if built else "downloaded and published", key, started)
    if built:
        return Outcome(key, COMPILED, entry, entry.compile_seconds)
    return Outcome(key, REMOTE, entry)


def _take_node_lock(key, disk: DiskTier, settings: Settings) -> tuple:
    """(held lock, None); or (None, Outcome) when the entry appeared on disk or in the remote
    tier while we waited; or (None, None) when the node's locks cannot be used (not private,
    read-only, ...; warned once): then this process downloads or compiles without the lock,
    which costs at worst a duplicate compile. CompileLockTimeout after DGEMM_LOCK_TIMEOUT."""
    try:
        disk.ensure_lock_dir()
        lock = filelock.FileLock(str(disk.lock_path(key)), mode=0o600)
        found = _wait_for_lock_or_entry(lock, key, disk, settings)
    except CompileLockTimeout:
        raise
    except (CacheDirError, OSError) as error:
        warning_once(f"lock:{disk.root}", "dgemm: cannot take per-key locks under %s (%s); "
                     "downloading or compiling without them", disk.root, error)
        return None, None
    return (None, found) if found is not None else (lock, None)


def _wait_for_lock_or_entry(lock: filelock.FileLock, key, disk: DiskTier,
                            settings: Settings) -> Optional[Outcome]:
    """None once `lock` is held; the Outcome of the entry if it shows up on disk or in the
    remote tier first (the holder may be stopped or slow while the kernel already exists)."""
    try:
        lock.acquire(timeout=0)
        return None
    except filelock.Timeout:
        stats.incr("waits")     # someone on this node is building this key: wait for them
    tier = remote.tier_for(settings)
    now = time.monotonic()
    deadline, next_remote_look = now + settings.lock_timeout, now + _REMOTE_POLL_S
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CompileLockTimeout(
                f"waited {settings.lock_timeout:g} s for another process compiling key {key} "
                f"(lock {disk.lock_path(key)}). Raise DGEMM_LOCK_TIMEOUT if compiles are that "
                f"slow, or find the process holding the lock.")
        try:
            lock.acquire(timeout=min(_DISK_POLL_S, remaining))
            return None
        except filelock.Timeout:
            pass
        entry = disk.get(key)
        if entry is not None:
            stats.incr("disk_hits")
            return Outcome(key, DISK, entry)
        if tier is not None and time.monotonic() >= next_remote_look:
            next_remote_look = time.monotonic() + _REMOTE_POLL_S
            entry = tier.get(key)
            if entry is not None:
                _publish_quietly(disk, entry)
                return Outcome(key, REMOTE, entry)


def _fetch_without_compiling(spec, key, disk: DiskTier, settings: Settings) -> Outcome:
    """DGEMM_DISABLE_JIT: a kernel may come from any cache tier but is never compiled."""
    tier = remote.tier_for(settings)
    entry = tier.get(key) if tier is not None else None
    if entry is None:
        raise MissingKernelError(spec, key)
    _publish_quietly(disk, entry)       # a read-only prewarmed cache is fine when JIT is off
    return Outcome(key, REMOTE, entry)


def _publish_quietly(disk: DiskTier, entry: Entry) -> None:
    """Put `entry` on disk. The kernel is in hand, so a disk that cannot take it (full,
    read-only, not private) must not fail the call: warn once per cache dir, serve from
    memory."""
    try:
        disk.put(entry)
    except (CacheDirError, OSError) as error:
        warning_once(f"put:{disk.root}", "dgemm: cannot write the disk cache %s (%s); serving "
                     "kernels from memory", disk.root, error)


def _compile(spec, key, compiler, rendered, secret) -> Entry:
    env.pause_for_tests("compile")
    compiled = compiler.compile(spec, rendered)
    stats.incr("compiles")
    stats.incr("compile_seconds", compiled.seconds)
    logger.info("dgemm: compiled %s (key %s) with %s in %.2f s", spec.cpp_instance(),
                key[:12], compiler.identity, compiled.seconds)
    entry = Entry(key=key, spec=entry_format.canonical_spec(spec), compiler=compiler.identity,
                  flags=compiler.flags(spec), symbol=compiled.symbol, cubin=compiled.cubin,
                  created=time.time(), compile_seconds=compiled.seconds)
    return entry_format.seal(entry, secret)


# ------------------------------------------------------------------------------------------------
def _debug(what: str, key: str, started: float) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("dgemm.jit: %s %s in %.1f ms", what, key[:12],
                     (time.perf_counter() - started) * 1e3)
