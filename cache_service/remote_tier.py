"""The remote tier: a dgemm Tier on Redis plus the cluster's single-flight compile.

    get(key) -> verified blob or None       never raises (Redis trouble is a miss)
    put(key, blob)                          raises RemoteUnavailable when Redis cannot take it
    single_flight(key, build) -> blob       download, or take the lease, build and publish

cache.py calls `single_flight` while holding the node's per-key file lock, so one process per
node talks to Redis for a key. Every blob from Redis is verified with dgemm.jit.entry.unpack
against the key asked for and the secret, exactly as the disk tier does; a refused blob is
deleted from Redis (if nobody replaced it meanwhile) and treated as a miss, so it is rebuilt.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from typing import Callable, Optional

import redis

from dgemm.jit import entry as entry_format
from dgemm.jit import env, stats
from dgemm.jit.errors import CompileError, EntryError

from .breaker import CircuitBreaker, RemoteUnavailable
from .client import connect, redact
from .lease import ACQUIRED, FAILED, PRESENT, Lease, LeaseNotOwnedError, Renewer
from .namespace import Namespace
from .notifications import Subscription
from .settings import RemoteSettings
from .store import EntryStore

logger = logging.getLogger("dgemm.remote")

# Entries built while Redis was down, uploaded once it answers again. Bounded: the sync agent
# (`dgemm-cache sync` / `push`) covers anything beyond it.
MAX_PENDING_UPLOADS = 256


class RemoteTier:
    def __init__(self, client: redis.Redis, namespace: Namespace = Namespace(),
                 secret: Optional[bytes] = None, settings: RemoteSettings = RemoteSettings(),
                 breaker: Optional[CircuitBreaker] = None, name: str = "redis"):
        self.client = client
        self.secret = secret
        self.settings = settings
        self.store = EntryStore(client, namespace, int(settings.entry_ttl_s * 1000))
        self.breaker = breaker or CircuitBreaker(name, settings.cooldown_s)
        self.calls = 0                     # Redis requests sent (for benchmarks)
        self._pending = collections.OrderedDict()     # key -> blob awaiting upload
        self._pending_lock = threading.Lock()
        self._refused: set = set()         # keys already logged as refused

    @property
    def namespace(self) -> Namespace:
        return self.store.ns

    # --- Tier interface -------------------------------------------------------------------------
    def get(self, key: str) -> Optional[bytes]:
        try:
            return self.download(key)
        except RemoteUnavailable:
            return None

    def put(self, key: str, blob: bytes) -> None:
        self.call(lambda: self.store.store(key, blob))

    # --- single flight --------------------------------------------------------------------------
    def single_flight(self, key: str, build: Callable[[], bytes]) -> bytes:
        """A verified blob for `key`: downloaded if some node published it, else built by
        exactly one node of the cluster (this one, if it wins the lease) and published.

        Raises CompileError when `build` fails here or a recent failure of the same key is on
        record. Falls back to `build()` alone when Redis is unavailable, and when the owner
        of the lease has not published within DGEMM_REMOTE_WAIT."""
        self._upload_pending()
        try:
            outcome = self._download_or_claim(key)
        except RemoteUnavailable:
            blob = build()
            self._remember_upload(key, blob)
            return blob
        except _WaitedTooLong as error:
            logger.warning("dgemm: %s; compiling %s locally", error, key[:12])
            return build()
        if isinstance(outcome, bytes):
            return outcome
        return self._build_and_publish(outcome, build)

    def _download_or_claim(self, key: str):
        """The verified blob, or our Lease when this node must build it."""
        blob = self.download(key)
        if blob is not None:
            return blob
        deadline = time.monotonic() + self.settings.max_wait_s
        recheck_s = self.settings.lease_ttl_s / 3
        with contextlib.ExitStack() as cleanup:
            notifications = None
            while True:
                if time.monotonic() > deadline:
                    raise _WaitedTooLong(f"no copy of {key[:12]} was published within "
                                         f"DGEMM_REMOTE_WAIT={self.settings.max_wait_s:g} s")
                lease = Lease(self.store, key, int(self.settings.lease_ttl_s * 1000))
                claim = self.call(lease.acquire)
                if claim.state == PRESENT:
                    blob = self.download(key)
                    if blob is not None:
                        return blob
                    continue        # refused and discarded, or expired just now: claim again
                if claim.state == FAILED:
                    raise _replayed_failure(key, claim.failure)
                if claim.state == ACQUIRED:
                    return lease
                # HELD: another node is compiling.
                if notifications is None:
                    # Subscribe only now (an owner never needs to), then look again before
                    # waiting: a publication just before the subscription would be missed.
                    stats.incr("waits")
                    notifications = cleanup.enter_context(
                        Subscription(self.client, channels=(self.namespace.channel(key),)))
                    self.call(notifications.open)
                    continue
                # Wake on the owner's notification, or when its lease could have expired (it
                # died), or at the re-check interval (a notification lost with a connection).
                timeout = min(claim.holder_ttl_ms / 1000 + 0.01, recheck_s,
                              max(deadline - time.monotonic(), 0.0))
                self.call(lambda: notifications.wait(timeout))

    def _build_and_publish(self, lease: Lease, build: Callable[[], bytes]) -> bytes:
        key = lease.key
        with Renewer(lambda: self.call(lease.renew), self.settings.lease_ttl_s / 3):
            try:
                blob = build()
            except CompileError as error:
                self._record_failure(lease, error)
                raise
            except BaseException:
                self._quietly(lease.release)
                raise
        try:
            self.call(lambda: lease.publish(blob))
        except LeaseNotOwnedError as error:
            logger.warning("dgemm: %s", error)      # our blob is still good for this process
        except RemoteUnavailable:
            self._remember_upload(key, blob)
        return blob

    def _record_failure(self, lease: Lease, error: CompileError) -> None:
        # Only a compiler's verdict on the source is worth replaying to other nodes. An error
        # without a compiler log (NVRTC missing, a broken install) is this node's problem.
        if not error.log:
            self._quietly(lease.release)
            return
        self._quietly(lambda: lease.record_failure(str(error), error.log,
                                                   int(self.settings.failure_ttl_s * 1000)))

    # --- downloads --------------------------------------------------------------------------------
    def download(self, key: str) -> Optional[bytes]:
        """Fetch and verify; a refused blob is deleted remotely and reads as a miss. Unlike
        `get`, raises RemoteUnavailable, so callers can tell "absent" from "unreachable"."""
        blob = self.call(lambda: self.store.fetch(key))
        if blob is None:
            return None
        try:
            entry_format.unpack(blob, key, self.secret)
        except EntryError as error:
            stats.incr("remote_errors")
            if key not in self._refused:
                self._refused.add(key)
                logger.warning("dgemm: refusing remote entry %s (%s); deleting it so it is "
                               "rebuilt", key[:12], error)
            self.call(lambda: self.store.discard(key, blob))
            return None
        stats.incr("remote_hits")
        return blob

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
        Raises RemoteUnavailable when Redis failed or the breaker refused."""
        def counted():
            self.calls += 1         # only requests that reach the network
            return operation()
        try:
            return self.breaker.call(counted)
        except RemoteUnavailable as error:
            if error.cause is not None:
                stats.incr("remote_errors")
            raise

    def _quietly(self, operation: Callable) -> None:
        """Best-effort cleanup: a lost lease or an unreachable Redis only delays waiters until
        the lease expires."""
        try:
            self.call(operation)
        except (RemoteUnavailable, LeaseNotOwnedError) as error:
            logger.debug("dgemm: lease cleanup skipped (%s)", error)


class _WaitedTooLong(Exception):
    pass


def _replayed_failure(key: str, failure: dict) -> CompileError:
    return CompileError(f"{failure.get('message', 'compile failed')} [failed on another node "
                        f"for key {key[:12]}; replayed from the cluster cache for "
                        f"DGEMM_REMOTE_FAIL_TTL seconds]", log=failure.get("log", ""))


def from_env() -> Optional[RemoteTier]:
    """The remote tier configured by DGEMM_REMOTE_CACHE, or None when it is unset. Creating
    it does not touch the network."""
    url = env.remote_cache()
    if url is None:
        return None
    settings = RemoteSettings.from_env()
    return RemoteTier(connect(url, settings.timeout_s), Namespace(env.remote_namespace()),
                      env.cache_secret(), settings, name=redact(url))
