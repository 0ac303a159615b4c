"""Names of every Redis key the cache uses, all under one namespace prefix (default "dgemm"):

    <ns>:entry:<key>     the entry blob (opaque here; the application verifies it)
    <ns>:lease:<key>     token of the node compiling <key> right now (SET NX PX)
    <ns>:fail:<key>      compiler log of a failed compile, kept briefly
    <ns>:notify:<key>    pub/sub channel: "published", "failed" or "released" for <key>
    <ns>:index           sorted set: key -> last use (unix ms), for listing and remote LRU
    <ns>:meta            hash: key -> small JSON (the application's `describe`, plus size)
    <ns>:counters        hash of cluster-wide counters (hits, misses, publishes, failures)

A single Redis (or a primary with replicas, possibly behind Sentinel) is assumed; scripts touch
several of these keys at once, which Redis Cluster would only allow if they shared a hash slot.
`kind_of(name)` tells which of these a Redis key is (None for any other name under the prefix),
so housekeeping that SCANs the namespace deletes only what the cache wrote.
"""
from __future__ import annotations

import dataclasses
import re

NOTIFY_PATTERN_SUFFIX = ":notify:*"
# Each kind of key the cache writes, by the part of its name after "<ns>:".
_PER_KEY_KINDS = ("entry", "lease", "fail")
_SINGLE_KINDS = ("index", "meta", "counters")


@dataclasses.dataclass(frozen=True)
class Namespace:
    prefix: str = "dgemm"

    def entry(self, key: str) -> str:
        return f"{self.prefix}:entry:{key}"

    def lease(self, key: str) -> str:
        return f"{self.prefix}:lease:{key}"

    def fail(self, key: str) -> str:
        return f"{self.prefix}:fail:{key}"

    def channel(self, key: str) -> str:
        return f"{self.prefix}:notify:{key}"

    @property
    def all_channels(self) -> str:
        """PSUBSCRIBE pattern matching every key's channel (the sync agent follows it)."""
        return self.prefix + NOTIFY_PATTERN_SUFFIX

    def key_of_channel(self, channel: str) -> str:
        return channel.rsplit(":", 1)[-1]

    @property
    def index(self) -> str:
        return f"{self.prefix}:index"

    @property
    def meta(self) -> str:
        return f"{self.prefix}:meta"

    @property
    def counters(self) -> str:
        return f"{self.prefix}:counters"

    # --- finding this namespace's keys (SCAN) ------------------------------------------------
    def _glob(self, suffix: str) -> str:
        """A SCAN MATCH pattern: the prefix with glob characters escaped, then `suffix`."""
        return re.sub(r"([\\*?\[\]])", r"\\\1", self.prefix) + suffix

    @property
    def entry_pattern(self) -> str:
        """SCAN MATCH pattern of every entry blob's key."""
        return self._glob(":entry:*")

    @property
    def any_pattern(self) -> str:
        """SCAN MATCH pattern of every key under the prefix (some may be another program's)."""
        return self._glob(":*")

    def key_of_entry(self, name: str) -> str:
        """The cache key of an entry blob's Redis key (`entry(key)` -> key)."""
        return name[len(self.prefix) + len(":entry:"):]

    def kind_of(self, name: str):
        """"entry", "lease", "fail", "index", "meta" or "counters" for a Redis key this
        namespace writes; None for any other name, which is never this cache's to delete."""
        if not name.startswith(self.prefix + ":"):
            return None
        rest = name[len(self.prefix) + 1:]
        if rest in _SINGLE_KINDS:
            return rest
        kind, sep, key = rest.partition(":")
        return kind if kind in _PER_KEY_KINDS and sep and key and ":" not in key else None
