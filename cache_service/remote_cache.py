"""A Redis store of verified blobs with the cluster's single-flight build.

    get(key) -> value | None           a verified value; never raises (Redis trouble is a miss)
    download(key) -> value | None      the same, but raises RemoteUnavailable when unreachable
    put(key, blob)                     raises RemoteUnavailable when Redis cannot take it
    single_flight(key, build) -> value download, or take the lease, build and publish

This package knows nothing of what a blob holds. The application injects:

    verify(key, blob) -> value     checks a downloaded blob and returns the value it stands for
                                   (e.g. a parsed, signature-checked entry); raising any
                                   Exception refuses the blob, which is then deleted from Redis
                                   (unless someone replaced it meanwhile) and reads as a miss
    describe(blob) -> dict         fields kept in the meta hash for listing without downloading
    events(name)                   called with HIT, WAIT or ERROR (see below) for the
                                   application's counters

Every downloaded blob goes through `verify` exactly once, and the value it returned is what the
caller gets; a blob this process built is never re-verified (its builder made it).

Every request goes through `call`, the circuit breaker: any failure of the remote (a Redis
error, a timeout, a reply Redis never sends) is RemoteUnavailable, and `single_flight` then
builds locally. A Redis at maxmemory still serves downloads (RemoteFull only for writes).

Stalls are bounded by the lease: a waiter looks for the entry at least every MAX_RECHECK_S and
takes over once the owner's lease expires (one `lease_ttl_s` after its owner died); an owner
whose publish fails releases its lease at once and uploads the blob later.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from typing import Callable, Optional, Tuple

import redis

from .breaker import CircuitBreaker
from .errors import BuildFailed, LeaseNotOwnedError, NotPublished, RemoteUnavailable
from .lease import ACQUIRED, FAILED, PRESENT, Lease, Renewer
from .namespace import Namespace
from .notifications import Subscription
from .settings import RemoteSettings
from .store import Describe, EntryStore, describe_nothing

logger = logging.getLogger("dgemm.remote")

# Entries built while Redis was down, uploaded once it answers again. Bounded: the sync agent
# (`dgemm-cache sync` / `push`) covers anything beyond it.
MAX_PENDING_UPLOADS = 256

# A waiter looks for the entry at least this often (and at every notification), so an entry
# that appears without a notification reaching it (a lost reply, a dropped subscription) is
# found within about a second, whatever the lease TTL.
MAX_RECHECK_S = 1.0

# Event names passed to `events`:
HIT = "hit"        # a downloaded blob passed verification
WAIT = "wait"      # this process waited for another node's build of a key
ERROR = "error"    # a Redis call failed, or a downloaded blob was refused

Verify = Callable[[str, bytes], object]
Build = Callable[[], Tuple[object, bytes]]     # -> (value, its blob to publish)


def _no_events(name: str) -> None:
    pass


class RemoteCache:
    def __init__(self, client: redis.Redis, verify: Verify, namespace: Namespace = Namespace(),
                 settings: RemoteSettings = RemoteSettings(), describe: Describe = describe_nothing,
                 events: Callable[[str], None] = _no_events,
                 breaker: Optional[CircuitBreaker] = None, name: str = "redis"):
        self.client = client
        self.verify = verify
        self.settings = settings
        self.events = events
        self.store = EntryStore(client, namespace, int(settings.entry_ttl_s * 1000), describe)
        self.breaker = breaker or CircuitBreaker(name, settings.cooldown_s)
        self.calls = 0                     # Redis requests sent (for benchmarks)
        self._pending = collections.OrderedDict()     # key -> blob awaiting upload
        self._pending_lock = threading.Lock()
        self._refused: set = set()         # keys already logged as refused

    @property
    def namespace(self) -> Namespace:
        return self.store.ns

    # --- get / put ------------------------------------------------------------------------------
    def get(self, key: str):
        try:
            return self.download(key)
        except RemoteUnavailable:
            return None

    def put(self, key: str, blob: bytes) -> None:
        self.call(lambda: self.store.store(key, blob))

    # --- single flight --------------------------------------------------------------------------
    def single_flight(self, key: str, build: Build,
                      build_on_failure: bool = True) -> Tuple[object, bool]:
        """(value, built here) for `key`: downloaded and verified if some node published it,
        else built by exactly one node of the cluster (this one, if it wins the lease) and
        published. `build()` returns (value, blob) and may raise anything.

        When this node's build raises an exception with a non-empty `.log` (a builder's verdict
        on its input), the failure is recorded so that other nodes fail fast with it for
        `failure_ttl_s`; they get BuildFailed(message, log). Falls back to `build()` alone when
        Redis is unavailable, and when the owner of the lease has not published within
        `max_wait_s`; with `build_on_failure=False` those two cases raise RemoteUnavailable
        and NotPublished instead, for values that must be the same on every node or none
        (the caller then does without)."""
        self._upload_pending()
        try:
            outcome = self._download_or_claim(key)
        except RemoteUnavailable as error:
            if not build_on_failure:
                raise
            if error.opened_circuit:        # once per outage, beside the breaker's warning
                logger.warning("dgemm: building %s (and what else is missing) locally until "
                               "the remote cache answers again; then it is uploaded", key[:12])
            value, blob = build()
            self._remember_upload(key, blob)
            return value, True
        except _WaitedTooLong as error:
            if not build_on_failure:
                raise NotPublished(str(error)) from None
            logger.warning("dgemm: %s; building %s locally", error, key[:12])
            return build()[0], True
        if isinstance(outcome, Lease):
            return self._build_and_publish(outcome, build), True
        return outcome[0], False

    def _download_or_claim(self, key: str):
        """(verified value,) or our Lease when this node must build it."""
        found = self._download(key)
        if found is not None:
            return found
        deadline = time.monotonic() + self.settings.max_wait_s
        recheck_s = min(self.settings.lease_ttl_s / 3, MAX_RECHECK_S)
        with contextlib.ExitStack() as cleanup:
            notifications = None
            while True:
                if time.monotonic() > deadline:
                    raise _WaitedTooLong(f"no copy of {key[:12]} was published within "
                                         f"{self.settings.max_wait_s:g} s")
                lease = Lease(self.store, key, int(self.settings.lease_ttl_s * 1000))
                claim = self.call(lease.acquire)
                if claim.state == PRESENT:
                    found = self._download(key)
                    if found is not None:
                        return found
                    continue        # refused and discarded, or expired just now: claim again
                if claim.state == FAILED:
                    raise _replayed_failure(key, claim.failure, self.settings.failure_ttl_s)
                if claim.state == ACQUIRED:
                    return lease
                # HELD: another node is building.
                if notifications is None:
                    # Subscribe only now (an owner never needs to), then look again before
                    # waiting: a publication just before the subscription would be missed.
                    self.events(WAIT)
                    notifications = cleanup.enter_context(
                        Subscription(self.client, channels=(self.namespace.channel(key),)))
                    self.call(notifications.open)
                    continue
                # Wake on the owner's notification, or when its lease could have expired (it
                # died), or at the re-check interval (a notification that did not reach us).
                timeout = min(claim.holder_ttl_ms / 1000 + 0.01, recheck_s,
                              max(deadline - time.monotonic(), 0.0))
                self.call(lambda: notifications.wait(timeout))

    def _build_and_publish(self, lease: Lease, build: Build):
        key = lease.key
        try:
            with Renewer(lambda: self.call(lease.renew), self.settings.lease_ttl_s / 3):
                value, blob = build()
        except Exception as error:
            self._record_failure(lease, error)
            raise
        except BaseException:
            self._release(lease)
            raise
        try:
            self.call(lambda: lease.publish(blob))
        except LeaseNotOwnedError as error:
            logger.warning("dgemm: %s", error)      # our value is still good for this process
        except RemoteUnavailable:
            # Free the waiters now rather than after the lease's TTL, and upload later.
            self._release(lease)
            self._remember_upload(key, blob)
        return value

    def _record_failure(self, lease: Lease, error: Exception) -> None:
        # Only a builder's verdict on its input (an error with a log) is worth replaying to
        # other nodes. An error without one (a missing compiler, a broken install) is this
        # node's problem: release the lease so that another node tries.
        log = getattr(error, "log", "")
        if log:
            try:
                self.call(lambda: lease.record_failure(
                    str(error), str(log), int(self.settings.failure_ttl_s * 1000)))
                return
            except LeaseNotOwnedError as lost:
                logger.debug("dgemm: failure not recorded (%s)", lost)
                return
            except RemoteUnavailable as unavailable:
                logger.debug("dgemm: failure not recorded (%s)", unavailable)
        self._release(lease)

    def _release(self, lease: Lease) -> None:
        """Best effort: free our lease now, so that waiters take over at once instead of after
        its TTL. Sent even when the breaker is open (the failed publish that calls this has
        usually just opened it): one more call, bounded by the timeout; if it fails too, the
        lease expires on its own."""
        self.calls += 1
        try:
            lease.release()
        except Exception as error:
            # LeaseNotOwnedError: it expired, or a publish whose reply was lost went through.
            logger.debug("dgemm: lease release skipped (%s)", error)

    # --- downloads --------------------------------------------------------------------------------
    def download(self, key: str):
        """Fetch and verify; a refused blob is deleted remotely and reads as a miss. Unlike
        `get`, raises RemoteUnavailable, so callers can tell "absent" from "unreachable"."""
        found = self._download(key)
        return None if found is None else found[0]

    def _download(self, key: str) -> Optional[tuple]:
        """(verified value,) or None: a 1-tuple, so that any value (even a falsy one) reads
        as found."""
        blob = self.call(lambda: self.store.fetch(key))
        if blob is None:
            return None
        try:
            value = self.verify(key, blob)
        except Exception as error:
            self.events(ERROR)
            if key not in self._refused:
                self._refused.add(key)
                logger.warning("dgemm: refusing remote entry %s (%s); deleting it so it is "
                               "rebuilt", key[:12], error)
            self.call(lambda: self.store.discard(key, blob))
            return None
        self.events(HIT)
        return (value,)

    # --- uploads deferred while Redis was down ----------------------------------------------
    def _remember_upload(self, key: str, blob: bytes) -> None:
        with self._pending_lock:
            self._pending[key] = blob
            while len(self._pending) > MAX_PENDING_UPLOADS:
                self._pending.popitem(last=False)

    def _upload_pending(self) -> None:
        with self._pending_lock:
            pending = list(self._pending.items())
        for key, blob in pending:
            try:
                self.put(key, blob)
            except RemoteUnavailable:
                return              # still down (or the breaker is open): keep them
            with self._pending_lock:
                self._pending.pop(key, None)

    @property
    def pending_uploads(self) -> int:
        with self._pending_lock:
            return len(self._pending)

    # --- Redis calls ------------------------------------------------------------------------------
    def call(self, operation: Callable):
        """Run one Redis request through the circuit breaker; count requests and failures.
        Raises RemoteUnavailable when the remote failed in any way or the breaker refused."""
        def counted():
            self.calls += 1         # only requests that reach the network
            return operation()
        try:
            return self.breaker.call(counted)
        except RemoteUnavailable as error:
            if error.cause is not None:
                self.events(ERROR)
            raise


class _WaitedTooLong(Exception):
    pass


def _replayed_failure(key: str, failure: dict, ttl_s: float) -> BuildFailed:
    return BuildFailed(f"{failure.get('message', 'build failed')} [failed on another node for "
                       f"key {key[:12]}; replayed from the cluster cache for up to {ttl_s:g} s]",
                       log=failure.get("log", ""))
