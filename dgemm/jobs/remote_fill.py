"""Prewarm's questions to the remote cache: does it answer (asked once, before compiling),
which of these keys does it hold (`--dry-run`), and, at the end of a job, make it hold every
kernel the job produced (`fill`), uploading from the local disk what it lacks.

The walk in each worker publishes what it compiles, but it falls back to the local disk
alone, quietly, when Redis is down, refuses the password or is full; `fill` is the one place
that checks the result, so the job can exit 3 instead of releasing trainers onto an empty
Redis. Each function uses a tier of its own (own connection and circuit breaker), so an
earlier failure in this process cannot make it answer from an open breaker without asking.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable, Optional

from cache_service.errors import RemoteUnavailable

_BATCH = 256                # keys per pipelined EXISTS round trip


def fresh_tier(settings):
    """A remote tier of its own for the settings' remote cache (which must be set)."""
    from dgemm.jit.remote import RemoteTier
    remote = settings.remote
    return RemoteTier.connect(remote.url, remote.namespace, remote.settings, settings.secret)


@contextlib.contextmanager
def remote_log_quiet(quiet: bool):
    """With `quiet`, this process's remote-tier warnings are held back: the job says once
    what is wrong with the remote cache (up front, and in its report)."""
    remote_logger = logging.getLogger("dgemm.remote")
    level = remote_logger.level
    if quiet:
        remote_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        remote_logger.setLevel(level)


def probe(settings) -> Optional[str]:
    """None when the remote cache is unset or answers a PING; else why it does not."""
    if settings.remote is None:
        return None
    cache = fresh_tier(settings).cache
    try:
        cache.call(cache.client.ping)
    except RemoteUnavailable as error:
        return reason(error, cache)
    return None


def present(tier, keys: list) -> list:
    """For each key, whether Redis holds it (one pipelined EXISTS per 256 keys). Raises
    RemoteUnavailable."""
    found = []
    for start in range(0, len(keys), _BATCH):
        batch = keys[start:start + _BATCH]
        found += tier.cache.call(lambda: tier.cache.store.present(batch))
    return [bool(there) for there in found]


def fill(outcomes: list, settings, stop: Optional[threading.Event] = None,
         note: Optional[Callable[[dict], None]] = None) -> dict:
    """Make Redis hold the kernel of every outcome that has one: ask which it lacks, upload
    those from the local disk. Sets each outcome's "remote" to present | uploaded | missing
    (missing: not known to be there, because Redis failed, the local copy is gone, or `stop`
    was set) and returns the counts with the first error. `note(outcome)` hears of each."""
    from dgemm.jit.tiers import DiskTier

    kernels = [o for o in outcomes if o["key"] is not None]
    status = {"kernels": len(kernels), "present": 0, "uploaded": 0, "missing": 0,
              "error": None}
    tier = fresh_tier(settings)
    disk = DiskTier(settings.cache_dir, settings.secret)
    try:
        for kernel, there in zip(kernels, present(tier, [k["key"] for k in kernels])):
            if stop is not None and stop.is_set():
                status["error"] = "interrupted before every kernel was checked"
                break
            kernel["remote"] = "present" if there else _upload(tier, disk, kernel)
            if kernel["remote"] == "missing" and status["error"] is None:
                status["error"] = "a kernel is gone from the local disk, so it cannot be uploaded"
    except RemoteUnavailable as error:
        status["error"] = reason(error, tier.cache)
    for kernel in kernels:
        kernel["remote"] = kernel["remote"] or "missing"
        status[kernel["remote"]] += 1
        if note is not None:
            note(kernel)
    return status


def _upload(tier, disk, outcome: dict) -> str:
    """uploaded | missing (not on disk). Raises RemoteUnavailable (down, full)."""
    entry = disk.get(outcome["key"])       # verified: what Redis gets is checked here
    if entry is None:
        return "missing"
    tier.put(entry)
    return "uploaded"


def reason(error: RemoteUnavailable, cache) -> str:
    """A remote failure without the URL the breaker puts first (the report shows it once)."""
    text = str(error)
    name = f"{cache.breaker.name}: "
    return text[len(name):] if text.startswith(name) else text
