"""The cluster lease against a real redis-server: token, fencing, notifications, renewal."""
from __future__ import annotations

import json
import time

import pytest

from cache_service.client import connect
from cache_service.lease import (ACQUIRED, FAILED, HELD, PRESENT, Lease, LeaseNotOwnedError,
                                 Renewer)
from cache_service.namespace import Namespace
from cache_service.notifications import Subscription
from cache_service.store import EntryStore
from redis_server import make_entry_blob, redis_server  # noqa: F401

KEY = "c0" * 32


def describe(blob: bytes) -> dict:
    """The application's meta fields (here: a stand-in; dgemm's is entry.describe)."""
    return {"head": blob[:8].hex()}


@pytest.fixture
def store(redis_server):
    return EntryStore(connect(redis_server.url), Namespace("t"), describe=describe)


def test_a_free_lease_is_acquired_with_the_requested_ttl(store):
    lease = Lease(store, KEY, ttl_ms=5000)
    assert lease.acquire().state == ACQUIRED
    assert 4000 < store.client.pttl("t:lease:" + KEY) <= 5000
    assert store.client.get("t:lease:" + KEY).decode() == lease.token


def test_a_held_lease_reports_how_long_the_holder_keeps_it(store):
    Lease(store, KEY, ttl_ms=5000).acquire()
    claim = Lease(store, KEY, ttl_ms=5000).acquire()
    assert claim.state == HELD and 4000 < claim.holder_ttl_ms <= 5000


def test_every_acquisition_gets_a_fresh_token(store):
    assert Lease(store, KEY, 5000).token != Lease(store, KEY, 5000).token


def test_acquire_reports_present_when_the_entry_exists_and_takes_no_lease(store):
    store.store(KEY, make_entry_blob(KEY))
    assert Lease(store, KEY, 5000).acquire().state == PRESENT
    assert not store.client.exists("t:lease:" + KEY)


def test_an_expired_lease_can_be_taken_over(store):
    Lease(store, KEY, ttl_ms=150).acquire()
    time.sleep(0.3)
    assert Lease(store, KEY, ttl_ms=5000).acquire().state == ACQUIRED


def test_renewing_extends_the_lease(store):
    lease = Lease(store, KEY, ttl_ms=1000)
    lease.acquire()
    store.client.pexpire("t:lease:" + KEY, 200)
    lease.renew()
    assert store.client.pttl("t:lease:" + KEY) > 800


def test_renewing_a_lease_taken_over_by_another_token_raises(store):
    lease = Lease(store, KEY, ttl_ms=1000)
    lease.acquire()
    store.client.set("t:lease:" + KEY, "someone-else")
    with pytest.raises(LeaseNotOwnedError):
        lease.renew()


def test_publishing_writes_entry_index_and_meta_and_frees_the_lease(store):
    lease = Lease(store, KEY, 5000)
    lease.acquire()
    blob = make_entry_blob(KEY)
    lease.publish(blob)
    client = store.client
    assert client.get("t:entry:" + KEY) == blob
    assert client.zscore("t:index", KEY) is not None
    assert json.loads(client.hget("t:meta", KEY)) == {"head": blob[:8].hex(), "bytes": len(blob)}
    assert not client.exists("t:lease:" + KEY)


def test_publishing_after_losing_the_lease_writes_nothing(store):
    lease = Lease(store, KEY, 5000)
    lease.acquire()
    store.client.set("t:lease:" + KEY, "someone-else")
    with pytest.raises(LeaseNotOwnedError):
        lease.publish(make_entry_blob(KEY))
    assert not store.client.exists("t:entry:" + KEY)
    assert store.client.get("t:lease:" + KEY) == b"someone-else"


def test_publishing_notifies_subscribers_of_the_key(store):
    lease = Lease(store, KEY, 5000)
    lease.acquire()
    with Subscription(store.client, channels=("t:notify:" + KEY,)) as notifications:
        notifications.open()
        lease.publish(make_entry_blob(KEY))
        assert notifications.wait(2.0) == ("t:notify:" + KEY, "published")


def test_a_waiting_subscription_returns_none_after_its_timeout(store):
    with Subscription(store.client, channels=("t:notify:" + KEY,)) as notifications:
        notifications.open()
        started = time.monotonic()
        assert notifications.wait(0.3) is None
        # Not early; and returns at all (a wait without its bound would block for good).
        assert 0.25 < time.monotonic() - started < 10


def test_a_recorded_failure_is_reported_to_the_next_claimant_with_its_log(store):
    lease = Lease(store, KEY, 5000)
    lease.acquire()
    lease.record_failure("nvrtc failed", "error: expected ';'", ttl_ms=5000)
    claim = Lease(store, KEY, 5000).acquire()
    assert claim.state == FAILED and claim.failure["log"] == "error: expected ';'"


def test_a_failure_record_expires_so_the_key_is_retried_later(store):
    lease = Lease(store, KEY, 5000)
    lease.acquire()
    lease.record_failure("nvrtc failed", "log", ttl_ms=150)
    time.sleep(0.3)
    assert Lease(store, KEY, 5000).acquire().state == ACQUIRED


def test_releasing_frees_the_lease_and_tells_waiters(store):
    lease = Lease(store, KEY, 5000)
    lease.acquire()
    with Subscription(store.client, channels=("t:notify:" + KEY,)) as notifications:
        notifications.open()
        lease.release()
        assert notifications.wait(2.0)[1] == "released"
    assert not store.client.exists("t:lease:" + KEY)


def test_releasing_a_lease_no_longer_owned_raises_and_keeps_the_new_owner(store):
    lease = Lease(store, KEY, 5000)
    lease.acquire()
    store.client.set("t:lease:" + KEY, "someone-else")
    with pytest.raises(LeaseNotOwnedError):
        lease.release()
    assert store.client.get("t:lease:" + KEY) == b"someone-else"


def test_the_renewer_keeps_a_lease_alive_beyond_its_ttl(store):
    # Renewed every 0.1 s, a 1 s lease survives 2.5 s unless the renewer stalls for ~0.9 s.
    lease = Lease(store, KEY, ttl_ms=1000)
    lease.acquire()
    with Renewer(lease.renew, interval_s=0.1) as renewer:
        time.sleep(2.5)
        assert store.client.get("t:lease:" + KEY).decode() == lease.token
    assert not renewer.lost


def test_the_renewer_stops_and_flags_a_lost_lease(store):
    lease = Lease(store, KEY, ttl_ms=1000)
    lease.acquire()
    with Renewer(lease.renew, interval_s=0.05) as renewer:
        store.client.set("t:lease:" + KEY, "someone-else")
        deadline = time.monotonic() + 10        # its next renewal finds the lease lost
        while not renewer.lost and time.monotonic() < deadline:
            time.sleep(0.02)
    assert renewer.lost
