"""Walk the tiers for a spec: memory -> disk -> [per-key file lock, disk again] -> remote
single flight or compile -> publish to disk and memory. GPU-free: prewarm hosts call it too.

Only the holder of a key's node-local lock compiles or talks to the remote tier for that key, so
a node compiles a kernel once however many ranks ask, and Redis load scales with nodes.
"""
from __future__ import annotations

import logging
import threading
import time

import filelock

from . import compiler as compiler_module
from . import entry as entry_format
from . import env, key as key_module, source, stats
from .entry import Entry
from .errors import CompileLockTimeout, MissingKernelError
from .tiers import DiskTier, MemoryTier

logger = logging.getLogger("dgemm.jit")

_memory = MemoryTier()
_state_lock = threading.Lock()
_disk_tiers: dict = {}          # (root, secret) -> DiskTier, so "log once" holds per process
_remote_tiers: dict = {}        # (url, namespace, secret) -> RemoteTier or None; keeps breaker state
_warned: set = set()


def ensure_compiled(spec) -> str:
    """Make sure some tier holds the kernel for `spec`; return its key. Never touches a GPU."""
    key, _ = _find_or_build(spec)
    return key


def get_entry(spec) -> Entry:
    """The verified entry (cubin, symbol, ...) for `spec`, compiling it if needed."""
    key, blob = _find_or_build(spec)
    return entry_format.unpack(blob, key, env.cache_secret())


def clear_memory() -> None:
    """Drop this process's memory tier (tests; tools that switch cache dirs)."""
    _memory.clear()


def reset_tiers() -> None:
    """Forget this process's disk and remote tier objects (and with them the circuit breaker's
    state), so the next call builds them afresh from the environment. For tests, and for a
    forked child that must not share its parent's Redis connections. Drops references only;
    closes nothing the parent may still use."""
    with _state_lock:
        _disk_tiers.clear()
        _remote_tiers.clear()


# ------------------------------------------------------------------------------------------------
def _find_or_build(spec) -> tuple:
    compiler = compiler_module.get_compiler()
    rendered = source.render(spec)
    key = key_module.key(spec, compiler, rendered)
    started = time.perf_counter()

    blob = _memory.get(key)
    if blob is not None:
        stats.incr("memory_hits")
        return key, blob

    disk = _disk_tier()
    blob = disk.get(key)
    if blob is not None:
        stats.incr("disk_hits")
        _debug("disk hit", key, started)
    elif env.disable_jit():
        blob = _fetch_without_compiling(spec, key, disk)
    else:
        blob = _build_under_lock(spec, key, compiler, rendered, disk)
    _memory.put(key, blob)
    return key, blob


def _build_under_lock(spec, key, compiler, rendered, disk: DiskTier) -> bytes:
    disk.ensure_dirs()
    lock = filelock.FileLock(str(disk.lock_path(key)), mode=0o600)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        # Someone on this node is compiling this key: wait for them instead of compiling too.
        stats.incr("waits")
        timeout = env.lock_timeout()
        try:
            lock.acquire(timeout=timeout)
        except filelock.Timeout:
            raise CompileLockTimeout(
                f"waited {timeout:g} s for another process compiling key {key} (lock "
                f"{disk.lock_path(key)}). Raise DGEMM_LOCK_TIMEOUT if compiles are that slow, or "
                f"find the process holding the lock.") from None
    try:
        # Another process may have published the entry while we waited for the lock.
        blob = disk.get(key)
        if blob is not None:
            stats.incr("disk_hits")
            return blob
        started = time.perf_counter()

        def build() -> bytes:
            return _compile(spec, key, compiler, rendered)

        remote = _remote_tier()
        blob = build() if remote is None else remote.single_flight(key, build)
        # Whatever the remote tier hands back is verified again before it reaches disk.
        entry_format.unpack(blob, key, env.cache_secret())
        disk.put(key, blob)
        _debug("built and published", key, started)
        return blob
    finally:
        lock.release()


def _fetch_without_compiling(spec, key, disk: DiskTier) -> bytes:
    """DGEMM_DISABLE_JIT: a kernel may come from any cache tier but is never compiled."""
    remote = _remote_tier()
    blob = remote.get(key) if remote is not None else None
    if blob is None:
        raise MissingKernelError(spec, key)
    try:
        disk.put(key, blob)
    except Exception as error:      # a read-only prewarmed cache is fine when JIT is off
        _warn_once(f"put:{disk.root}", "dgemm: cannot write %s (%s); serving from memory",
                   disk.root, error)
    return blob


def _compile(spec, key, compiler, rendered) -> bytes:
    env.pause_for_tests("compile")
    compiled = compiler.compile(spec, rendered)
    stats.incr("compiles")
    stats.incr("compile_seconds", compiled.seconds)
    logger.info("dgemm: compiled %s (key %s) with %s in %.2f s", spec.cpp_instance(),
                key[:12], compiler.identity, compiled.seconds)
    entry = Entry(key=key, spec=spec, compiler=compiler.identity, flags=compiler.flags(spec),
                  symbol=compiled.symbol, cubin=compiled.cubin, created=time.time(),
                  compile_seconds=compiled.seconds)
    return entry_format.pack(entry, env.cache_secret())


# ------------------------------------------------------------------------------------------------
def _disk_tier() -> DiskTier:
    root, secret = env.cache_dir(), env.cache_secret()
    with _state_lock:
        tier = _disk_tiers.get((root, secret))
        if tier is None:
            tier = _disk_tiers[(root, secret)] = DiskTier(root, secret)
        return tier


def _remote_tier():
    """cache_service's RemoteTier for the current DGEMM_REMOTE_CACHE, or None. One per URL,
    namespace and secret per process, so its circuit breaker remembers failures across calls
    (the secret is part of the tier: it signs and checks what goes to and comes from Redis)."""
    url = env.remote_cache()
    if url is None:
        return None
    settings = (url, env.remote_namespace(), env.cache_secret())
    with _state_lock:
        if settings in _remote_tiers:
            return _remote_tiers[settings]
    try:
        from cache_service import remote_tier    # optional: only needed with a remote cache
    except ModuleNotFoundError as error:
        if error.name not in ("cache_service", "cache_service.remote_tier"):
            raise
        _warn_once("no-cache-service", "dgemm: DGEMM_REMOTE_CACHE is set but cache_service is "
                   "not installed; using the local cache only")
        tier = None
    else:
        tier = remote_tier.from_env()
    with _state_lock:
        return _remote_tiers.setdefault(settings, tier)


def _warn_once(tag: str, message: str, *args) -> None:
    if tag not in _warned:
        _warned.add(tag)
        logger.warning(message, *args)


def _debug(what: str, key: str, started: float) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("dgemm.jit: %s %s in %.1f ms", what, key[:12],
                     (time.perf_counter() - started) * 1e3)
