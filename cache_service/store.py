"""Entry storage on Redis: fetch (and touch), store, discard, list.

Every write keeps three structures in step, atomically (one Lua script): the entry blob, the
index sorted set (key -> last use, for listing and remote LRU) and the meta hash (key -> small
JSON, so listing or a sync agent filtering by arch never downloads blobs). The blob alone is
authoritative: an entry that expired under its TTL (`RemoteSettings.entry_ttl_s`) may leave
index and meta members behind until `prune()`.

Reads never depend on writes. A fetch is a plain GET of the blob, with the bookkeeping (index
score, TTL refresh, hit and miss counters) sent in the same round trip as a separate script
whose failure is ignored: a Redis at maxmemory under `noeviction` (Redis's default policy)
refuses writes, and must still serve what it holds. Scripts that write an entry do the
bookkeeping with `redis.pcall`, so an index, meta or counters key of the wrong type (someone
SET it to a string) costs the listing of that entry, never the entry; the listings report such
a key as DamagedKey, naming it and its repair.

Housekeeping (`dgemm-cache gc --remote`, `clear --remote`): `scan_entries` lists every entry
blob with its size and last use (SCAN in batches, never KEYS); `evict` removes one entry with
its index and meta members in one script, only if it is unchanged since it was listed (same
size, same last use), so an entry used or republished meanwhile survives; `clear` deletes the
namespace's keys (SCAN + DEL in batches), leaving live leases to expire on their own.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from typing import Callable, Iterator, Optional

import redis

from . import replies
from .lua import LuaScript
from .namespace import Namespace

logger = logging.getLogger("dgemm.remote")

# What each structure holds, for the messages that ask to delete a damaged one.
INDEX_HOLDS = "the last-use time of each entry (listing and LRU order; the entries are kept)"
META_HOLDS = "the listing metadata of each entry (the entries themselves are kept)"
COUNTERS_HOLDS = "the cluster's statistics counters"

# The bookkeeping of a fetch, sent after the GET; best effort (pcall: a full Redis or a
# damaged key only skips that part).
# KEYS[1] entry, KEYS[2] index, KEYS[3] counters
# ARGV[1] cache key, ARGV[2] now (unix ms), ARGV[3] entry TTL in ms (0: entries do not expire)
# return: 1 after marking a present entry used (index score, TTL refresh, hit counter);
#         0 after counting a miss
TOUCH = LuaScript("""
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.pcall('HINCRBY', KEYS[3], 'misses', 1)
    return 0
end
redis.pcall('ZADD', KEYS[2], ARGV[2], ARGV[1])
if tonumber(ARGV[3]) > 0 then redis.pcall('PEXPIRE', KEYS[1], ARGV[3]) end
redis.pcall('HINCRBY', KEYS[3], 'hits', 1)
return 1
""")

# The body shared by STORE and the lease's fenced publish (which prepends its ownership check
# and so shifts nothing: it uses KEYS[5] and ARGV[7]). Only the SET may fail the script.
# KEYS[1] entry, KEYS[2] index, KEYS[3] meta, KEYS[4] counters
# ARGV[1] blob, ARGV[2] entry TTL in ms (0: none), ARGV[3] now (unix ms), ARGV[4] cache key,
# ARGV[5] meta JSON, ARGV[6] notification channel
STORE_BODY = """
if tonumber(ARGV[2]) > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
    redis.call('SET', KEYS[1], ARGV[1])
end
redis.pcall('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.pcall('HSET', KEYS[3], ARGV[4], ARGV[5])
redis.pcall('HINCRBY', KEYS[4], 'publishes', 1)
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
redis.pcall('ZREM', KEYS[2], ARGV[1])
redis.pcall('HDEL', KEYS[3], ARGV[1])
redis.pcall('HINCRBY', KEYS[4], 'refused', 1)
return 1
""")


# Remove one entry for housekeeping, fenced on what the caller saw.
# KEYS[1] entry, KEYS[2] index, KEYS[3] meta, KEYS[4] counters
# ARGV[1] cache key, ARGV[2] the blob's size when listed, ARGV[3] its last use (unix ms) when
# listed, or '' when the index had none
# return: 1 when removed; 0 when the entry is gone, or was used or replaced since it was listed
EVICT = LuaScript("""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('STRLEN', KEYS[1]) ~= tonumber(ARGV[2]) then return 0 end
local used = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
if type(used) == 'table' then return 0 end
if ARGV[3] == '' then
    if used then return 0 end
elseif not used or tonumber(used) ~= tonumber(ARGV[3]) then
    return 0
end
redis.call('DEL', KEYS[1])
redis.pcall('ZREM', KEYS[2], ARGV[1])
redis.pcall('HDEL', KEYS[3], ARGV[1])
redis.pcall('HINCRBY', KEYS[4], 'evicted', 1)
return 1
""")


@dataclasses.dataclass(frozen=True)
class StoredEntry:
    """One entry blob as listed by `scan_entries`."""
    key: str
    size: int                       # bytes of the blob
    last_use_ms: Optional[float]    # the index's score; None when the index has no member


def now_ms() -> int:
    return int(time.time() * 1000)


Describe = Callable[[bytes], dict]      # blob -> JSON-able fields for the meta hash


def describe_nothing(blob: bytes) -> dict:
    return {}


class EntryStore:
    """Raw entry operations; they raise `redis.RedisError`, UnexpectedReply (a reply Redis
    never sends) or DamagedKey (a key of the wrong type), and never verify (RemoteCache does).

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
        """The blob of `key` or None; one round trip: GET, then the bookkeeping, whose
        failure is ignored (see the module docstring)."""
        entry_key = self.ns.entry(key)
        touch_keys = [entry_key, self.ns.index, self.ns.counters]
        touch_args = [key, now_ms(), self.entry_ttl_ms]
        pipe = self.client.pipeline(transaction=False)
        pipe.get(entry_key)
        pipe.evalsha(TOUCH.sha, len(touch_keys), *touch_keys, *touch_args)
        blob, touched = pipe.execute(raise_on_error=False)
        if isinstance(blob, Exception):
            if replies.is_wrongtype(blob):
                raise replies.damaged(entry_key, "string", "one entry blob", cause=blob)
            raise blob
        blob = replies.blob_or_none(blob, "GET of an entry")
        self._check_touch(touched, touch_keys, touch_args)
        return blob

    def _check_touch(self, touched, keys: list, args: list) -> None:
        if isinstance(touched, redis.exceptions.NoScriptError):
            try:        # first use on this server, or after a restart: load it for next time
                touched = TOUCH(self.client, keys, args)
            except redis.RedisError as error:
                touched = error
        if isinstance(touched, Exception):
            logger.debug("dgemm: remote bookkeeping skipped (%s)", touched)
            return
        replies.flag(touched, "entry bookkeeping script")

    def store(self, key: str, blob: bytes) -> None:
        replies.flag(STORE(self.client, self.store_keys(key), self.store_args(key, blob)),
                     "store script")

    def discard(self, key: str, blob: bytes) -> bool:
        return replies.flag(DISCARD(self.client, [self.ns.entry(key), self.ns.index,
                                                  self.ns.meta, self.ns.counters],
                                    [key, hashlib.sha1(blob).hexdigest()]),
                            "discard script")

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
        return [replies.flag(found, "EXISTS") for found in pipe.execute()]

    def iter_meta(self, batch: int = 500) -> Iterator[tuple]:
        """(key, meta dict, last use unix s or None) for every key in the meta hash, without
        downloading blobs. Keys whose entry has expired may still appear; `prune()` drops
        them. A member whose JSON is unreadable lists with an empty dict."""
        last_use = dict(self._index())
        with replies.key_of_type(self.ns.meta, "hash", META_HOLDS):
            members = self.client.hscan_iter(self.ns.meta, count=batch)
            for member, meta in members:
                key = _member(member, "HSCAN of the meta hash")
                yield key, _meta_dict(replies.blob_or_none(meta, "HSCAN of the meta hash")), \
                    last_use.get(key)

    def _index(self) -> Iterator[tuple]:
        """(key, last use unix s) for every member of the index."""
        with replies.key_of_type(self.ns.index, "sorted set", INDEX_HOLDS):
            pairs = replies.array(self.client.zrange(self.ns.index, 0, -1, withscores=True),
                                  "ZRANGE of the index")
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                    and isinstance(pair[1], float)):
                raise replies.unexpected("ZRANGE of the index", pair, "member-score pairs")
            yield _member(pair[0], "ZRANGE of the index"), pair[1] / 1000

    def count_meta(self) -> int:
        """How many keys the meta hash lists (for progress bars): one HLEN."""
        with replies.key_of_type(self.ns.meta, "hash", META_HOLDS):
            count = self.client.hlen(self.ns.meta)
        if not isinstance(count, int) or count < 0:
            raise replies.unexpected("HLEN of the meta hash", count, "a non-negative integer")
        return count

    def _meta_keys(self) -> list:
        with replies.key_of_type(self.ns.meta, "hash", META_HOLDS):
            members = replies.array(self.client.hkeys(self.ns.meta), "HKEYS of the meta hash")
        return [_member(member, "HKEYS of the meta hash") for member in members]

    def prune(self) -> int:
        """Drop index and meta members whose entry is gone (expired or deleted by hand)."""
        keys = sorted({key for key, _ in self._index()} | set(self._meta_keys()))
        stale = [key for key, found in zip(keys, self.present(keys)) if not found]
        if stale:
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(self.ns.index, *stale)
            pipe.hdel(self.ns.meta, *stale)
            pipe.execute()
        return len(stale)

    # --- housekeeping ---------------------------------------------------------------------------
    def scan_entries(self, batch: int = 500) -> Iterator[StoredEntry]:
        """Every entry blob of the namespace with its size and last use: SCAN in batches, and
        one pipelined round trip of STRLEN and ZSCORE per batch."""
        names = []
        for name in self.client.scan_iter(match=self.ns.entry_pattern, count=batch):
            names.append(_member(name, "SCAN of the entries"))
            if len(names) == batch:
                yield from self._sizes_and_uses(names)
                names = []
        yield from self._sizes_and_uses(names)

    def _sizes_and_uses(self, names: list) -> Iterator[StoredEntry]:
        if not names:
            return
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.strlen(name)
            pipe.zscore(self.ns.index, self.ns.key_of_entry(name))
        answers = pipe.execute(raise_on_error=False)
        for name, size, used in zip(names, answers[::2], answers[1::2]):
            if isinstance(used, Exception):
                if replies.is_wrongtype(used):
                    raise replies.damaged(self.ns.index, "sorted set", INDEX_HOLDS, cause=used)
                raise used
            if isinstance(size, Exception):
                if replies.is_wrongtype(size):      # not a blob: skip what we did not write
                    logger.warning("dgemm: %s is not a string; not an entry of this cache", name)
                    continue
                raise size
            if used is not None and not isinstance(used, float):
                raise replies.unexpected("ZSCORE of the index", used, "a score or nil")
            yield StoredEntry(self.ns.key_of_entry(name), replies.integer(size, "STRLEN"), used)

    def evict(self, entry: StoredEntry) -> bool:
        """Remove `entry` (blob, index and meta members) if it is still as listed: same size,
        same last use. False when it is gone, or was used or replaced meanwhile."""
        used = "" if entry.last_use_ms is None else repr(entry.last_use_ms)
        return replies.flag(EVICT(self.client, [self.ns.entry(entry.key), self.ns.index,
                                                self.ns.meta, self.ns.counters],
                                  [entry.key, entry.size, used]),
                            "evict script")

    def clear(self, dry_run: bool = False, batch: int = 500) -> dict:
        """Delete every key of the namespace (SCAN + DEL, `batch` at a time); {kind: count}
        of what was (or, with dry_run, would be) deleted. Leases are kept and counted as
        "lease": a node may be compiling under one, and they expire within their TTL. Keys
        under the prefix that this cache does not write are left alone."""
        found = {}
        doomed = []
        for raw in self.client.scan_iter(match=self.ns.any_pattern, count=batch):
            name = _member(raw, "SCAN of the namespace")
            kind = self.ns.kind_of(name)
            if kind is None:
                continue
            found[kind] = found.get(kind, 0) + 1
            if kind != "lease" and not dry_run:
                doomed.append(name)
                if len(doomed) == batch:
                    self.client.delete(*doomed)
                    doomed = []
        if doomed:
            self.client.delete(*doomed)
        return found

    def counters(self) -> dict:
        with replies.key_of_type(self.ns.counters, "hash", COUNTERS_HOLDS):
            raw = self.client.hgetall(self.ns.counters)
        if not isinstance(raw, dict):
            raise replies.unexpected("HGETALL of the counters", raw, "field-value pairs")
        return {_member(name, "HGETALL of the counters"): self._counter(name, value)
                for name, value in raw.items()}

    def _counter(self, name: bytes, value) -> int:
        value = replies.blob_or_none(value, "HGETALL of the counters")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise replies.damaged(self.ns.counters, f"hash of integers (its field {name!r} "
                                  f"holds {replies.shown(value)})", COUNTERS_HOLDS) from None


def _member(raw, what: str) -> str:
    """A key name from a listing reply: text, or UnexpectedReply."""
    if isinstance(raw, bytes):
        try:
            return raw.decode()
        except UnicodeDecodeError:
            pass
    raise replies.unexpected(what, raw, "key names")


def _meta_dict(raw: Optional[bytes]) -> dict:
    """A meta member as a dict: {} when it is not a JSON object (written by someone else);
    "bytes" kept only as a non-negative integer, as the store writes it."""
    try:
        meta = json.loads(raw) if raw else {}
    except (ValueError, RecursionError):        # RecursionError: absurdly nested JSON
        return {}
    if not isinstance(meta, dict):
        return {}
    size = meta.get("bytes")
    if "bytes" in meta and not (type(size) is int and size >= 0):
        del meta["bytes"]
    return meta
