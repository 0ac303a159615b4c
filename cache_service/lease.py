"""The cluster lease that makes one node compile a kernel while the others wait.

Shaped like redis-py's Lock: a fresh random token per acquisition; SET PX to take it when free
(inside the script that first looks for the entry); every later operation (renew, publish,
record a failure, release) compares the token and acts inside one Lua script, so a node whose
lease expired (it was paused, partitioned, or slow) can never overwrite the work of the node
that took over. Timeline this prevents: A takes the lease and stalls past the TTL; B takes over
and publishes; A wakes up and would publish or release over B's state; the token check turns
A's call into LeaseNotOwnedError instead.

Waiters learn of the outcome from pub/sub on the key's channel: "published", "failed" or
"released". The lease is short and renewed (`RemoteSettings.lease_ttl_s`, renewed every third of
it), so a dead owner stalls its waiters for at most one TTL.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import threading
from typing import Callable, Optional

import redis

from . import replies
from .errors import LeaseNotOwnedError
from .lua import LuaScript
from .namespace import Namespace
from .store import STORE_BODY, EntryStore

logger = logging.getLogger("dgemm.remote")

PRESENT, FAILED, ACQUIRED, HELD = "present", "failed", "acquired", "held"

# Writes only to take a free lease, so that a Redis at maxmemory (which refuses writes) still
# answers "present" and "held". A lease without expiry was not set by a lease (someone SET it
# by hand): it is given one TTL, so that it cannot stall every waiter forever. A failure record
# of the wrong type is ignored (pcall).
# KEYS[1] lease, KEYS[2] entry, KEYS[3] failure record
# ARGV[1] our token, ARGV[2] lease TTL in ms
# return: {"present"}          the entry exists: download it, nothing to compile
#         {"failed", record}   a compile of this key failed recently (JSON: message, log)
#         {"acquired"}         the lease is ours for ARGV[2] ms
#         {"held", pttl}       another node holds it for pttl more ms
ACQUIRE = LuaScript("""
if redis.call('EXISTS', KEYS[2]) == 1 then return {'present'} end
local record = redis.pcall('GET', KEYS[3])
if type(record) == 'string' then return {'failed', record} end
local held = redis.call('PTTL', KEYS[1])
if held == -1 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    held = tonumber(ARGV[2])
end
if held >= 0 then return {'held', held} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {'acquired'}
""")

# KEYS[1] lease
# ARGV[1] our token, ARGV[2] lease TTL in ms
# return: 1 renewed; 0 the lease is not ours (expired, or another node holds it)
RENEW = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
""")

# Fenced publish: the entry is written only while the lease holds our token.
# KEYS[1] entry, KEYS[2] index, KEYS[3] meta, KEYS[4] counters (as store.STORE), KEYS[5] lease
# ARGV[1..6] as store.STORE (blob, entry TTL ms, now ms, cache key, meta JSON, channel),
# ARGV[7] our token
# return: 1 published, lease released, waiters notified; 0 the lease is not ours (no write)
PUBLISH = LuaScript("""
if redis.call('GET', KEYS[5]) ~= ARGV[7] then return 0 end
redis.call('DEL', KEYS[5])
""" + STORE_BODY)

# KEYS[1] lease, KEYS[2] failure record, KEYS[3] counters
# ARGV[1] our token, ARGV[2] record (JSON: message, log), ARGV[3] record TTL in ms,
# ARGV[4] notification channel
# return: 1 recorded, lease released, waiters notified; 0 the lease is not ours (no write)
RECORD_FAILURE = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('DEL', KEYS[1])
redis.pcall('HINCRBY', KEYS[3], 'failures', 1)
redis.call('PUBLISH', ARGV[4], 'failed')
return 1
""")

# KEYS[1] lease
# ARGV[1] our token, ARGV[2] notification channel
# return: 1 released and waiters told to try themselves; 0 the lease is not ours
RELEASE = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 1
""")


@dataclasses.dataclass(frozen=True)
class Claim:
    """What `Lease.acquire` found: `state` is PRESENT, FAILED, ACQUIRED or HELD."""
    state: str
    holder_ttl_ms: int = 0          # HELD: how long the other node's lease still runs
    failure: Optional[dict] = None  # FAILED: {"message": ..., "log": ...}


class Lease:
    """One attempt at the lease for one cache key. Methods raise `redis.RedisError` for Redis
    trouble and UnexpectedReply for a reply Redis never sends (the caller's circuit breaker
    handles both), and LeaseNotOwnedError when fenced out."""

    def __init__(self, store: EntryStore, key: str, ttl_ms: int):
        if ttl_ms < 100:
            raise ValueError(f"lease TTL must be at least 100 ms; got {ttl_ms} ms")
        self.store = store
        self.key = key
        self.ttl_ms = int(ttl_ms)
        self.token = secrets.token_hex(16)     # fresh per acquisition, never reused
        ns: Namespace = store.ns
        self._lease_key = ns.lease(key)
        self._channel = ns.channel(key)

    @property
    def client(self) -> redis.Redis:
        return self.store.client

    def acquire(self) -> Claim:
        ns = self.store.ns
        reply = replies.array(ACQUIRE(self.client, [self._lease_key, ns.entry(self.key),
                                                    ns.fail(self.key)],
                                      [self.token, self.ttl_ms]), "lease script")
        state = reply[0] if reply else None
        if state == FAILED.encode() and len(reply) == 2 and isinstance(reply[1], bytes):
            return Claim(FAILED, failure=_failure_record(reply[1]))
        if state == HELD.encode() and len(reply) == 2:
            remaining_ms = replies.integer(reply[1], "lease script")
            return Claim(HELD, holder_ttl_ms=max(remaining_ms, 0))
        if state in (PRESENT.encode(), ACQUIRED.encode()) and len(reply) == 1:
            return Claim(state.decode())
        raise replies.unexpected("lease script", reply,
                                 "one of present, failed, acquired or held")

    def renew(self) -> None:
        if not replies.flag(RENEW(self.client, [self._lease_key], [self.token, self.ttl_ms]),
                            "lease renewal script"):
            raise LeaseNotOwnedError(f"lease on {self.key[:12]} was lost before renewal")

    def publish(self, blob: bytes) -> None:
        """Write the entry, index and meta, release the lease and notify, only if still ours."""
        keys = self.store.store_keys(self.key) + [self._lease_key]
        args = self.store.store_args(self.key, blob) + [self.token]
        if not replies.flag(PUBLISH(self.client, keys, args), "publish script"):
            raise LeaseNotOwnedError(f"lease on {self.key[:12]} was lost before publishing; "
                                     f"another node took over and publishes instead")

    def record_failure(self, message: str, log: str, ttl_ms: int) -> None:
        record = json.dumps({"message": message, "log": log})
        ns = self.store.ns
        if not replies.flag(RECORD_FAILURE(self.client,
                                           [self._lease_key, ns.fail(self.key), ns.counters],
                                           [self.token, record, int(ttl_ms), self._channel]),
                            "failure record script"):
            raise LeaseNotOwnedError(f"lease on {self.key[:12]} was lost before recording "
                                     f"the failure")

    def release(self) -> None:
        if not replies.flag(RELEASE(self.client, [self._lease_key], [self.token, self._channel]),
                            "lease release script"):
            raise LeaseNotOwnedError(f"lease on {self.key[:12]} was already lost")


def _failure_record(raw: bytes) -> dict:
    """The failure record as {"message": str, "log": str}, whatever someone stored there."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):        # RecursionError: absurdly nested JSON
        record = None
    if not (isinstance(record, dict) and isinstance(record.get("message", ""), str)
            and isinstance(record.get("log", ""), str)):
        return {"message": "unreadable failure record", "log": repr(raw[:2000])}
    return record


class Renewer:
    """Renews a lease every `interval_s` on a daemon thread while the owner compiles.
    `renew` is the lease's renew wrapped by the caller (circuit breaker, counters). A lost lease
    stops the thread and sets `lost`; Redis trouble is retried at the next interval, since the
    lease may still be alive when Redis comes back."""

    def __init__(self, renew: Callable[[], None], interval_s: float):
        self._renew = renew
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self.lost = False
        self._thread = threading.Thread(target=self._run, name="dgemm-lease-renewer",
                                        daemon=True)

    def __enter__(self) -> "Renewer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            try:
                self._renew()
            except LeaseNotOwnedError as error:
                self.lost = True
                logger.warning("dgemm: %s", error)
                return
            except Exception as error:   # Redis unwell: the breaker has logged it already
                logger.debug("dgemm: lease renewal failed (%s); retrying in %g s", error,
                             self._interval_s)
