"""Entry storage on Redis: fetch (and touch), store, discard, list. One round trip each.

Every write keeps three structures in step, atomically (one Lua script): the entry blob, the
index sorted set (key -> last use, for listing and remote LRU) and the meta hash (key -> small
JSON, so listing or a sync agent filtering by arch never downloads blobs). The blob alone is
authoritative: an entry that expired under its TTL (`RemoteSettings.entry_ttl_s`) may leave index and meta members
behind until `prune()`.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Callable, Iterator, Optional

import redis

from .lua import LuaScript
from .namespace import Namespace

# KEYS[1] entry, KEYS[2] index, KEYS[3] counters
# ARGV[1] cache key, ARGV[2] now (unix ms), ARGV[3] entry TTL in ms (0: entries do not expire)
# return: the blob, after marking it used (index score, TTL refresh, hit counter);
#         nil, after counting a miss
FETCH = LuaScript("""
local blob = redis.call('GET', KEYS[1])
if not blob then
    redis.call('HINCRBY', KEYS[3], 'misses', 1)
    return false
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
redis.call('HINCRBY', KEYS[3], 'hits', 1)
return blob
""")

# The body shared by STORE and the lease's fenced publish (which prepends its ownership check
# and so shifts nothing: it uses KEYS[5] and ARGV[7]).
# KEYS[1] entry, KEYS[2] index, KEYS[3] meta, KEYS[4] counters
# ARGV[1] blob, ARGV[2] entry TTL in ms (0: none), ARGV[3] now (unix ms), ARGV[4] cache key,
# ARGV[5] meta JSON, ARGV[6] notification channel
STORE_BODY = """
if tonumber(ARGV[2]) > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
    redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
redis.call('HINCRBY', KEYS[4], 'publishes', 1)
redis.call('PUBLISH', ARGV[6], 'published')
return 1
"""
# Unconditional store (push, sync, bundle import): keys and arguments as STORE_BODY.
# return: 1
STORE = LuaScript(STORE_BODY)

# KEYS[1] entry, KEYS[2] index, KEYS[3] meta, KEYS[4] counters
# ARGV[1] cache key, ARGV[2] sha1 (hex) of the blob that failed verification
# return: 1 when that blob was removed; 0 when the entry is gone or was replaced meanwhile
# (someone republished it: their copy must not be deleted on the strength of ours)
DISCARD = LuaScript("""
local blob = redis.call('GET', KEYS[1])
if not blob or redis.sha1hex(blob) ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[4], 'refused', 1)
return 1
""")


def now_ms() -> int:
    return int(time.time() * 1000)


Describe = Callable[[bytes], dict]      # blob -> JSON-able fields for the meta hash


def describe_nothing(blob: bytes) -> dict:
    return {}


class EntryStore:
    """Raw entry operations; they raise `redis.RedisError` and never verify (RemoteCache does).

    `describe(blob) -> dict` supplies the meta hash's fields for a blob (the application knows
    its format; this store does not); "bytes" (the blob's size) is added here."""

    def __init__(self, client: redis.Redis, namespace: Namespace, entry_ttl_ms: int = 0,
                 describe: Describe = describe_nothing):
        self.client = client
        self.ns = namespace
        self.entry_ttl_ms = entry_ttl_ms
        self.describe = describe

    def meta_of(self, blob: bytes) -> str:
        """The small JSON kept in the meta hash for `blob`."""
        return json.dumps(dict(self.describe(blob), bytes=len(blob)), sort_keys=True,
                          separators=(",", ":"))

    def fetch(self, key: str) -> Optional[bytes]:
        return FETCH(self.client, [self.ns.entry(key), self.ns.index, self.ns.counters],
                     [key, now_ms(), self.entry_ttl_ms])

    def store(self, key: str, blob: bytes) -> None:
        STORE(self.client, self.store_keys(key), self.store_args(key, blob))

    def discard(self, key: str, blob: bytes) -> bool:
        return bool(DISCARD(self.client, [self.ns.entry(key), self.ns.index, self.ns.meta,
                                          self.ns.counters],
                            [key, hashlib.sha1(blob).hexdigest()]))

    def store_keys(self, key: str) -> list:
        return [self.ns.entry(key), self.ns.index, self.ns.meta, self.ns.counters]

    def store_args(self, key: str, blob: bytes) -> list:
        return [blob, self.entry_ttl_ms, now_ms(), key, self.meta_of(blob), self.ns.channel(key)]

    # --- listing -------------------------------------------------------------------------------
    def present(self, keys: list) -> list:
        """[bool] per key: does Redis hold its entry? One pipelined round trip."""
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.exists(self.ns.entry(key))
        return [bool(found) for found in pipe.execute()]

    def iter_meta(self, batch: int = 500) -> Iterator[tuple]:
        """(key, meta dict, last use unix s) for every indexed key, without downloading blobs.
        Keys whose entry has expired may still appear; `prune()` drops them."""
        last_use = {member.decode(): score / 1000 for member, score in
                    self.client.zrange(self.ns.index, 0, -1, withscores=True)}
        for key_bytes, meta in self.client.hscan_iter(self.ns.meta, count=batch):
            key = key_bytes.decode()
            try:
                info = json.loads(meta)
            except ValueError:
                info = {}
            yield key, info, last_use.get(key)

    def prune(self) -> int:
        """Drop index and meta members whose entry is gone (expired or deleted by hand)."""
        keys = [member.decode() for member in self.client.zrange(self.ns.index, 0, -1)]
        keys += [k.decode() for k in self.client.hkeys(self.ns.meta)]
        keys = sorted(set(keys))
        stale = [key for key, found in zip(keys, self.present(keys)) if not found]
        if stale:
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(self.ns.index, *stale)
            pipe.hdel(self.ns.meta, *stale)
            pipe.execute()
        return len(stale)

    def counters(self) -> dict:
        return {name.decode(): int(value)
                for name, value in self.client.hgetall(self.ns.counters).items()}
