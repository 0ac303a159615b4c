"""Names of every Redis key the cache uses, all under one namespace prefix (default "dgemm"):

    <ns>:entry:<key>     the entry blob (opaque here; the application verifies it)
    <ns>:lease:<key>     token of the node compiling <key> right now (SET NX PX)
    <ns>:fail:<key>      compiler log of a failed compile, kept briefly
    <ns>:notify:<key>    pub/sub channel: "published", "failed" or "released" for <key>
    <ns>:index           sorted set: key -> last use (unix ms), for listing and remote LRU
    <ns>:meta            hash: key -> small JSON (the application's `describe`, plus size)
    <ns>:counters        hash of cluster-wide counters (hits, misses, publishes, failures)

A single Redis (or a primary with replicas) is assumed; scripts touch several of these keys at
once, which Redis Cluster would only allow if they shared a hash slot.
"""
from __future__ import annotations

import dataclasses

NOTIFY_PATTERN_SUFFIX = ":notify:*"


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
