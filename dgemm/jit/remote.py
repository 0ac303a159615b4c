"""dgemm's remote tier: cache_service's RemoteCache, built from an `env.Settings`, handing up
verified Entries.

    tier_for(settings) -> RemoteTier | None      None when DGEMM_REMOTE_CACHE is unset
    RemoteTier.get(key) -> Entry | None          verified once; never raises
    RemoteTier.download(key) -> Entry | None     the same, but raises RemoteUnavailable
    RemoteTier.put(entry)                        raises RemoteUnavailable
    RemoteTier.single_flight(key, build) -> (Entry, built here)
    RemoteTier.cache                             the RemoteCache (breaker, namespace, store,
                                                 calls, pending_uploads) for the CLI and jobs

cache_service knows nothing of dgemm; this module injects what it needs: `verify` is
`entry.unpack` with the settings' secret (the one verification of a downloaded blob), the meta
hash's fields come from `entry.describe`, its events feed `stats`, and a failure replayed from
another node (cache_service's BuildFailed) becomes dgemm's CompileError.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

from . import entry as entry_format
from . import state, stats
from .entry import Entry
from .env import Settings
from .errors import CompileError, ConfigError

# One tier per (url, namespace, secret, numbers) per process, so its circuit breaker remembers
# failures across calls (the secret is part of it: it checks what comes from Redis).
_tiers = state.table("jit.remote_tiers")

_STATS = {"hit": "remote_hits", "wait": "waits", "error": "remote_errors"}


class RemoteTier:
    def __init__(self, cache):
        self.cache = cache          # cache_service.remote_cache.RemoteCache

    @classmethod
    def connect(cls, url: str, namespace: str, settings, secret: Optional[bytes]) -> "RemoteTier":
        """A tier on the Redis at `url` (keys under `namespace`, numbers from `settings`, a
        cache_service RemoteSettings) whose downloads are checked against `secret`. Lazy: the
        network is touched by the first call."""
        from cache_service.client import connect, redact
        from cache_service.namespace import Namespace
        from cache_service.remote_cache import RemoteCache
        try:
            client = connect(url, settings.timeout_s)
        except ValueError as error:       # a URL that did not come through env.remote_cache
            raise ConfigError(str(error)) from None
        return cls(RemoteCache(client,
                               verify=lambda key, blob: entry_format.unpack(blob, key, secret),
                               namespace=Namespace(namespace), settings=settings,
                               describe=entry_format.describe, events=_count,
                               name=redact(url)))

    def get(self, key: str) -> Optional[Entry]:
        return self.cache.get(key)

    def download(self, key: str) -> Optional[Entry]:
        return self.cache.download(key)

    def put(self, entry: Entry) -> None:
        self.cache.put(entry.key, entry.blob)

    def single_flight(self, key: str, build: Callable[[], Entry]) -> Tuple[Entry, bool]:
        """(Entry, built here): downloaded if some node published `key`, else built by one node
        of the cluster. `build()` returns a sealed Entry (its blob is published as it is).
        CompileError when the build fails here or failed recently on another node."""
        from cache_service.errors import BuildFailed
        try:
            return self.cache.single_flight(key, lambda: _with_blob(build()))
        except BuildFailed as error:
            raise CompileError(f"{error}; DGEMM_REMOTE_FAIL_TTL sets how long failures are "
                               f"replayed", log=error.log) from error


def tier_for(settings: Settings) -> Optional[RemoteTier]:
    """The RemoteTier for `settings.remote`, or None when it is unset; one per settings, so
    its circuit breaker remembers failures across calls. Creating one does not touch the
    network."""
    remote = settings.remote
    if remote is None:
        return None
    memo = (remote, settings.secret)
    if memo in _tiers:
        return _tiers[memo]
    return _tiers.setdefault(memo, RemoteTier.connect(remote.url, remote.namespace,
                                                      remote.settings, settings.secret))


def from_env() -> Optional[RemoteTier]:
    """`tier_for(Settings.from_env())`, for commands that need nothing else of the settings."""
    return tier_for(Settings.from_env())


def _with_blob(entry: Entry) -> tuple:
    return entry, entry.blob


def _count(event: str) -> None:
    stats.incr(_STATS[event])
