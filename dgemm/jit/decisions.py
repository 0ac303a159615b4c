"""Decisions: small verified JSON records, made once per cluster and shared through the same
tiers as kernels (memory, local disk, Redis). The autotuner (`dgemm.autotune`) stores in one
the kernel it timed fastest for a class of problems; this module knows nothing of GEMMs.

    decision_key(fields) -> key          sha256 of a canonical JSON of what the decision is about
    lookup(key, settings) -> Resolution  memory and disk only (e.g. during CUDA-graph capture)
    fetch(key, settings) -> Resolution   memory, disk, then Redis; never decides (prewarm)
    resolve(key, decide, settings, wait_s) -> Resolution
                                         memory -> disk -> [node lock, disk again] -> remote
                                         single flight -> decide() -> publish

A decision is an entry of its own kind (`entry.seal_decision` / `entry.unpack_decision`: the
same checksum and HMAC as kernels, another magic), stored apart from kernels: on disk under
`<DGEMM_CACHE_DIR>/decisions/` (a DiskTier with the same layout and the same trust rules), in
Redis under the namespace `<DGEMM_REMOTE_NAMESPACE>:decisions` (so kernel listings, gc and
sync never see one).

Unlike a kernel, a decision is never made twice to fill a gap: every process must use the same
one (ranks must run the same kernel), so when it cannot be had - the wait for another process
runs past `wait_s`, Redis is unreachable, `decide()` fails, or a stored decision is refused
(corrupt, forged, unsigned while a secret is set) - `resolve` returns a Resolution with
`payload` None and a `reason`, and the caller does without (the autotuner uses the heuristic).
A refused decision is removed from its tier, as a bad kernel entry is, so a later process
decides afresh. Counters: `dgemm.jit.stats()` (decision_*_hits, decision_waits,
decisions_refused).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from typing import Callable, Optional

import filelock

from . import entry as entry_format
from . import state, stats
from .entry import Decision
from .env import Settings
from .errors import CacheDirError, EntryError
from .logs import logger, warning_once
from .tiers import DiskTier, MemoryTier

FORMAT_VERSION = 1                  # enters every decision key
SUBDIR = "decisions"                # under DGEMM_CACHE_DIR
NAMESPACE_SUFFIX = ":decisions"     # after DGEMM_REMOTE_NAMESPACE

MEMORY, DISK, REMOTE, DECIDED, NONE = "memory", "disk", "remote", "decided", "none"

_DISK_POLL_S = 0.5
_REMOTE_POLL_S = 1.0

_memory = MemoryTier(state.table("decisions.memory"))
_disk_tiers = state.table("decisions.disk_tiers")       # (root, secret) -> DiskTier
_remote_caches = state.table("decisions.remote")        # (remote, secret, wait) -> RemoteCache
_refused = state.table("decisions.refused")             # key -> why it was refused


class NoDecision(Exception):
    """Raised by a `decide` callable that could not decide (nothing could be timed, ...)."""


@dataclasses.dataclass(frozen=True)
class Resolution:
    key: str
    source: str                      # MEMORY | DISK | REMOTE | DECIDED, or NONE
    payload: Optional[dict]          # the decision's JSON object; None when there is none
    reason: str = ""                 # why there is none

    @property
    def found(self) -> bool:
        return self.payload is not None


def decision_key(fields: dict) -> str:
    """64 hex digits naming the decision about `fields` (any JSON object: what was decided
    about, and everything that would make another decision right)."""
    canonical = json.dumps({"decision_format": FORMAT_VERSION, "entry_format":
                            entry_format.FORMAT_VERSION, "fields": fields},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def disk_tier(settings: Settings) -> DiskTier:
    root = settings.cache_dir / SUBDIR
    found = _disk_tiers.get((root, settings.secret))
    if found is None:
        found = _disk_tiers.setdefault(
            (root, settings.secret),
            DiskTier(root, settings.secret, unpack=_refusing(entry_format.unpack_decision)))
    return found


def remote_cache(settings: Settings, wait_s: float):
    """The cache_service RemoteCache of decisions for `settings.remote` (None when unset);
    waiters give up after `wait_s`. One per settings, so its breaker remembers failures."""
    remote = settings.remote
    if remote is None:
        return None
    memo = (remote, settings.secret, wait_s)
    found = _remote_caches.get(memo)
    if found is None:
        from cache_service.client import connect, redact
        from cache_service.namespace import Namespace
        from cache_service.remote_cache import RemoteCache
        verify = _refusing(entry_format.unpack_decision)
        secret = settings.secret
        found = _remote_caches.setdefault(memo, RemoteCache(
            connect(remote.url, remote.settings.timeout_s),
            verify=lambda key, blob: verify(blob, key, secret),
            namespace=Namespace(remote.namespace + NAMESPACE_SUFFIX),
            settings=dataclasses.replace(remote.settings, max_wait_s=wait_s),
            describe=_describe, events=_count_remote, name=redact(remote.url)))
    return found


# ------------------------------------------------------------------------------------------
def lookup(key: str, settings: Optional[Settings] = None) -> Resolution:
    """The decision for `key` from memory or local disk, without waiting, deciding or talking
    to Redis (safe during CUDA-graph capture)."""
    settings = settings or Settings.from_env()
    found = _local(key, settings)
    return found or _none(key, _refused.get(key, "no decision in memory or on disk"))


def fetch(key: str, settings: Optional[Settings] = None) -> Resolution:
    """The decision for `key` from memory, local disk or Redis, without deciding or waiting
    for anyone (a job that only needs to know what was decided)."""
    settings = settings or Settings.from_env()
    found = _local(key, settings)
    if found is not None:
        return found
    cache = remote_cache(settings, 0.0)
    decision = cache.get(key) if cache is not None else None
    if decision is None:
        return _none(key, _refused.get(key, "no decision has been published"))
    _publish_quietly(disk_tier(settings), decision)
    _memory.put(decision)
    return Resolution(key, REMOTE, decision.fields)


def resolve(key: str, decide: Callable[[], dict], settings: Optional[Settings] = None,
            wait_s: float = 300.0) -> Resolution:
    """The decision for `key`: found in a tier, or made by `decide()` (returns the payload, a
    JSON object; raises NoDecision or anything else when it cannot) in exactly one process
    of the node (its per-key lock) and, with a remote, of the cluster (its lease), then
    published to disk and Redis. Everyone else waits at most `wait_s` for it. Never raises
    for a missing, refused or late decision: the Resolution says why there is none."""
    settings = settings or Settings.from_env()
    found = _local(key, settings)
    if found is not None or key in _refused:
        return found or _none(key, _refused[key])
    disk = disk_tier(settings)
    lock, found = _take_node_lock(key, disk, settings, wait_s)
    if found is not None:
        return found
    try:
        if lock is not None:
            # Another process of the node may have published while we waited for the lock.
            found = _local(key, settings)
            if found is not None or key in _refused:
                return found or _none(key, _refused[key])
        return _fetch_or_decide(key, decide, disk, settings, wait_s)
    finally:
        if lock is not None:
            lock.release()


# ------------------------------------------------------------------------------------------
def _local(key: str, settings: Settings) -> Optional[Resolution]:
    decision = _memory.get(key)
    if decision is not None:
        stats.incr("decision_memory_hits")
        return Resolution(key, MEMORY, decision.fields)
    decision = disk_tier(settings).get(key)
    if decision is not None:
        stats.incr("decision_disk_hits")
        _memory.put(decision)
        return Resolution(key, DISK, decision.fields)
    return None


def _fetch_or_decide(key, decide, disk: DiskTier, settings: Settings,
                     wait_s: float) -> Resolution:
    from cache_service.errors import NotPublished, RemoteUnavailable

    def build():
        if key in _refused:     # a stored copy was refused (and removed) on the way here
            raise NoDecision(_refused[key])
        started = time.perf_counter()
        payload = decide()
        decision = entry_format.seal_decision(key, payload, settings.secret)
        logger.info("dgemm: decided %s in %.2f s", key[:12], time.perf_counter() - started)
        return decision, decision.blob

    cache = remote_cache(settings, wait_s)
    try:
        if cache is None:
            decision, built = build()[0], True
        else:
            decision, built = cache.single_flight(key, build, build_on_failure=False)
    except NotPublished as error:
        return _none(key, f"{error} (DGEMM_AUTOTUNE_WAIT)")
    except RemoteUnavailable as error:
        return _none(key, f"the remote cache is unavailable ({error}), so the cluster cannot "
                          f"agree on a decision")
    except Exception as error:          # decide() failed (NoDecision, a CUDA error, ...)
        return _none(key, _refused.get(key) or f"{type(error).__name__}: {error}")
    _publish_quietly(disk, decision)
    _memory.put(decision)
    if not built:
        return Resolution(key, REMOTE, decision.fields)
    return Resolution(key, DECIDED, decision.fields)


def _take_node_lock(key, disk: DiskTier, settings: Settings, wait_s: float) -> tuple:
    """(held lock, None); (None, Resolution) when the decision showed up, was refused or the
    wait ran past `wait_s`; (None, None) when the node's locks cannot be used (warned once:
    the cluster lease, if any, still keeps the decision single)."""
    try:
        disk.ensure_lock_dir()
        lock = filelock.FileLock(str(disk.lock_path(key)), mode=0o600)
        lock.acquire(timeout=0)
        return lock, None
    except filelock.Timeout:
        pass
    except (CacheDirError, OSError) as error:
        warning_once(f"decision-lock:{disk.root}", "dgemm: cannot take per-key locks under "
                     "%s (%s); deciding without them", disk.root, error)
        return None, None
    stats.incr("decision_waits")        # another process of the node is deciding: wait
    cache = remote_cache(settings, wait_s)
    now = time.monotonic()
    deadline, next_remote_look = now + wait_s, now + _REMOTE_POLL_S
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None, _none(key, f"waited {wait_s:g} s for another process deciding "
                                    f"{key[:12]} (lock {disk.lock_path(key)}; "
                                    f"DGEMM_AUTOTUNE_WAIT)")
        try:
            lock.acquire(timeout=min(_DISK_POLL_S, remaining))
            return lock, None
        except filelock.Timeout:
            pass
        found = _local(key, settings)
        if found is not None or key in _refused:
            return None, found or _none(key, _refused[key])
        if cache is not None and time.monotonic() >= next_remote_look:
            next_remote_look = time.monotonic() + _REMOTE_POLL_S
            decision = cache.get(key)
            if decision is not None:
                _publish_quietly(disk, decision)
                _memory.put(decision)
                return None, Resolution(key, REMOTE, decision.fields)


def _publish_quietly(disk: DiskTier, decision: Decision) -> None:
    try:
        disk.put(decision)
    except (CacheDirError, OSError) as error:
        warning_once(f"decision-put:{disk.root}", "dgemm: cannot write decisions under %s "
                     "(%s); keeping them in memory", disk.root, error)


def _none(key: str, reason: str) -> Resolution:
    return Resolution(key, NONE, None, reason)


_refused_lock = threading.Lock()


def _refusing(unpack):
    """`unpack` that also remembers, per key, that a stored decision was refused: the tiers
    report a bad entry as a miss (and remove it), and a refused decision must not be taken
    for a missing one that this process may go on to decide."""
    def checked(blob: bytes, key: str, secret: Optional[bytes]):
        try:
            return unpack(blob, key, secret)
        except EntryError as error:
            stats.incr("decisions_refused")
            with _refused_lock:
                _refused.setdefault(key, f"the stored decision {key[:12]} was refused "
                                         f"({error})")
            raise
    return checked


def refuse(key: str, reason: str) -> None:
    """Mark the decision `key` refused by its user (e.g. it names a kernel this build cannot
    run): counted, and this process will not use or remake it."""
    stats.incr("decisions_refused")
    with _refused_lock:
        _refused.setdefault(key, reason)


def _describe(blob: bytes) -> dict:
    return entry_format.describe_decision(blob)


_REMOTE_STATS = {"hit": "decision_remote_hits", "wait": "decision_waits",
                 "error": "remote_errors"}


def _count_remote(event: str) -> None:
    stats.incr(_REMOTE_STATS[event])
