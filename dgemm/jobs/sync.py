"""Moving entries between a node's disk and Redis: push, pull, and the sync agent that keeps
doing both.

    push(tier, disk)                  upload the entries Redis lacks
    pull(tier, disk, match)           download the matching entries the disk lacks
    SyncAgent(tier, disk, match).run()  push, pull, then follow new publications until SIGTERM

`tier` is dgemm's `jit.remote.RemoteTier`, `disk` its `jit.tiers.DiskTier`. Every entry is
verified once on the way, in both directions: the disk tier's get verifies what is uploaded,
the remote tier's get verifies what is downloaded (digest, key, HMAC with a secret), and the
verified Entry is stored on the other side as it is.

NOTES: this lives in dgemm, not in cache_service, because it is dgemm's policy over dgemm's
objects: it moves entries between dgemm's disk tier and the remote store, and chooses them by
the arch and compiler of dgemm's entry headers (`Match`). cache_service stays a store that
knows no entry format; what this needs from it is its public API (RemoteCache, Subscription).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
from typing import Callable, Optional

from cache_service.errors import RemoteUnavailable
from dgemm.jit.remote import RemoteTier
from dgemm.jit.tiers import DiskTier

logger = logging.getLogger("dgemm.remote")
# One line per entry moved or passed over (`dgemm-cache -v push/pull/sync`): a logger of its
# own, so that the sync daemon's info-level log stays one line per reconcile without -v.
entry_log = logging.getLogger("dgemm.sync")

_BATCH = 256       # keys per pipelined EXISTS round trip


@dataclasses.dataclass
class Transfer:
    """What one push or pull did."""
    copied: int = 0          # entries moved
    present: int = 0         # already on the other side
    skipped: int = 0         # another arch or compiler (pull only)
    failed: int = 0          # unreadable or refused on the way (see the log)
    bytes: int = 0

    def add(self, other: "Transfer") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass(frozen=True)
class Match:
    """Which remote entries a node wants: its archs and its compiler ("nvrtc 13.0"). An empty
    field matches everything."""
    archs: tuple = ()
    compiler: Optional[str] = None

    def describe(self) -> str:
        """What this node wants, for logs: 'arch sm_90a, nvrtc 13.0'."""
        archs = "arch " + "/".join(self.archs) if self.archs else "any arch"
        return f"{archs}, {self.compiler or 'any compiler'}"

    def __call__(self, meta: dict) -> bool:
        if self.archs and meta.get("arch") not in self.archs:
            return False
        return self.compiler is None or meta.get("compiler") == self.compiler


Progress = Callable[[str], None]      # called once per entry handled, with a short summary


def push(tier: RemoteTier, disk: DiskTier, progress: Optional[Progress] = None,
         keys: Optional[list] = None) -> Transfer:
    """Upload local entries that Redis does not hold. Raises RemoteUnavailable."""
    result = Transfer()
    keys = sorted(key for key, _ in disk.iter_entries()) if keys is None else keys
    for start in range(0, len(keys), _BATCH):
        batch = keys[start:start + _BATCH]
        present = tier.cache.call(lambda: tier.cache.store.present(batch))
        for key, found in zip(batch, present):
            if found:
                result.present += 1
                entry_log.info("push %s: already in the remote cache", key[:12])
                continue
            entry = disk.get(key)       # verified; a bad local entry is removed, not sent
            if entry is None:
                result.failed += 1
                entry_log.info("push %s: FAILED: gone from the local disk, or unreadable or "
                               "invalid there (see the warning)", key[:12])
            else:
                tier.put(entry)
                result.copied += 1
                result.bytes += len(entry.blob)
                entry_log.info("push %s: uploaded %d bytes (%s)", key[:12], len(entry.blob),
                               _what(entry.spec_fields, entry.compiler))
            if progress:
                progress(key[:12])
    return result


def pull(tier: RemoteTier, disk: DiskTier, match: Match = Match(),
         progress: Optional[Progress] = None) -> Transfer:
    """Download remote entries that `match` and the disk lacks. Raises RemoteUnavailable."""
    result = Transfer()
    listing = tier.cache.call(lambda: list(tier.cache.store.iter_meta()))
    for key, meta, _ in listing:
        result.add(pull_one(tier, disk, key, meta, match))
        if progress:
            progress(key[:12])
    return result


def pull_one(tier: RemoteTier, disk: DiskTier, key: str, meta: dict, match: Match) -> Transfer:
    """Download one listed entry. Keys and meta come from Redis unverified: a key that is not
    a cache key (it would become a file name) fails this entry, a meta that is not an object
    counts as empty."""
    meta = meta if isinstance(meta, dict) else {}
    if not match(meta):
        entry_log.info("pull %.12s: skipped: %s, not %s", key,
                       _what(meta.get("spec"), meta.get("compiler")), match.describe())
        return Transfer(skipped=1)
    try:
        path = disk.entry_path(key)
    except ValueError:
        logger.warning("dgemm sync: remote key %.80r is not a cache key; skipped", key)
        return Transfer(failed=1)
    if path.exists():
        entry_log.info("pull %s: already on the local disk", key[:12])
        return Transfer(present=1)
    entry = tier.download(key)         # verified; a refused blob is deleted remotely
    if entry is None:
        entry_log.info("pull %s: FAILED: expired since it was listed, or refused (see the "
                       "warning)", key[:12])
        return Transfer(failed=1)
    disk.put(entry)
    entry_log.info("pull %s: downloaded %d bytes (%s)", key[:12], len(entry.blob),
                   _what(entry.spec_fields, entry.compiler))
    return Transfer(copied=1, bytes=len(entry.blob))


def _what(spec, compiler) -> str:
    """'fp8_gemm normal n=4096 k=7168 sm_90a, nvrtc 13.0' from (unverified) listing fields."""
    spec = spec if isinstance(spec, dict) else {}
    parts = [str(spec.get(name)) for name in ("kernel", "gemm_type") if spec.get(name)]
    parts += [f"{name}={spec.get(name)}" for name in ("n", "k") if name in spec]
    parts.append(str(spec.get("arch") or "arch ?"))
    return f"{' '.join(parts)}, {compiler if isinstance(compiler, str) else 'compiler ?'}"[:160]


class SyncAgent:
    """`dgemm-cache sync`: a foreground per-node daemon. Reconciles (push, then pull) at start
    and every `reconcile_s`, and between reconciliations downloads each entry published
    anywhere in the cluster as its notification arrives, so later processes on the node hit
    local disk. Redis outages are waited out (the reconcile after it catches up). SIGTERM or
    SIGINT stops it within about a second, between two entries."""

    def __init__(self, tier: RemoteTier, disk: DiskTier, match: Match = Match(),
                 reconcile_s: float = 300.0, poll_s: float = 1.0):
        self.tier, self.disk, self.match = tier, disk, match
        self.reconcile_s, self.poll_s = reconcile_s, poll_s
        self.stopping = threading.Event()
        self.totals = Transfer()

    def stop(self, *_signal_args) -> None:
        self.stopping.set()

    def run(self) -> Transfer:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, self.stop)
        logger.info("dgemm sync: following %s", self.tier.cache.breaker.name)
        while not self.stopping.is_set():
            try:
                self._follow()
            except _Stopped:
                break
            except RemoteUnavailable as error:
                cooldown_s = self.tier.cache.breaker.cooldown_s
                logger.warning("dgemm sync: %s; retrying in %g s", error, cooldown_s)
                self.stopping.wait(max(cooldown_s, self.poll_s))
        logger.info("dgemm sync: stopped after %s", self.totals)
        return self.totals

    def _follow(self) -> None:
        # Imported here: it imports redis, which `dgemm-cache --help` should not wait for.
        from cache_service.notifications import Subscription
        cache = self.tier.cache
        ns = cache.namespace
        with Subscription(cache.client, patterns=(ns.all_channels,)) as notifications:
            # Subscribed first, so nothing published during the reconcile is missed.
            cache.call(notifications.open)
            self.reconcile()
            next_reconcile = time.monotonic() + self.reconcile_s
            while not self.stopping.is_set():
                message = cache.call(lambda: notifications.wait(self.poll_s))
                if message is not None and message[1] == "published":
                    self._pull_published(ns.key_of_channel(message[0]))
                if time.monotonic() >= next_reconcile:
                    self.reconcile()
                    next_reconcile = time.monotonic() + self.reconcile_s

    def reconcile(self) -> None:
        """Push what Redis lacks, pull what this node lacks. Raises RemoteUnavailable."""
        pushed = push(self.tier, self.disk, progress=self._stop_check)
        pulled = pull(self.tier, self.disk, self.match, progress=self._stop_check)
        self.totals.add(pushed)
        self.totals.add(pulled)
        logger.info("dgemm sync: pushed %d, pulled %d (%d failed)", pushed.copied,
                    pulled.copied, pushed.failed + pulled.failed)

    def _pull_published(self, key: str) -> None:
        cache = self.tier.cache
        raw = cache.call(lambda: cache.client.hget(cache.namespace.meta, key))
        meta = _json_or_empty(raw)
        self.totals.add(pull_one(self.tier, self.disk, key, meta, self.match))

    def _stop_check(self, _summary: str) -> None:
        if self.stopping.is_set():
            raise _Stopped()


class _Stopped(Exception):
    pass


def _json_or_empty(raw) -> dict:
    """A meta hash value as a dict; {} for anything malformed (not JSON, nested too deeply,
    not an object)."""
    try:
        value = json.loads(raw) if raw else {}
    except (ValueError, TypeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
