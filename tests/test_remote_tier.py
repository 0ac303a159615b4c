"""dgemm's RemoteTier (cache_service's RemoteCache with dgemm's verify, describe and counters)
against a real redis-server: verification, single flight, failure replay, breaker fallback
and deferred uploads. Builds are plain functions here; the end-to-end tests through
dgemm.jit.ensure_compiled are in test_remote_cluster.py."""
from __future__ import annotations

import threading
import time

import pytest

import dgemm.jit
from cache_service.breaker import CLOSED, OPEN
from cache_service.client import redact
from cache_service.settings import RemoteSettings
from dgemm.jit import entry
from dgemm.jit.errors import CompileError, ConfigError
from dgemm.jit.remote import RemoteTier, from_env
from redis_server import RedisServer, make_entry_blob, redis_server  # noqa: F401

KEY = "d1" * 32
SECRET = b"cluster-secret"
FAST = RemoteSettings(timeout_s=0.5, cooldown_s=60, lease_ttl_s=1.0, max_wait_s=10,
                      failure_ttl_s=5)


def make_tier(server, secret=None, settings=FAST) -> RemoteTier:
    return RemoteTier.connect(server.url, "t", settings, secret)


class CountingBuild:
    """A build that returns the Entry of `blob` (as a compile returns a sealed Entry)."""

    def __init__(self, blob: bytes, seconds: float = 0.0, error: Exception = None):
        self.blob, self.seconds, self.error, self.count = blob, seconds, error, 0

    def __call__(self) -> entry.Entry:
        self.count += 1
        time.sleep(self.seconds)
        if self.error is not None:
            raise self.error
        return entry.unpack(self.blob, entry.read_header(self.blob)["key"])


def blob_of(result) -> bytes:
    """The published blob of single_flight's (Entry, built here)."""
    return result[0].blob


# --- get / put -----------------------------------------------------------------------------------
def test_a_missing_key_is_a_miss(redis_server):
    assert make_tier(redis_server).get(KEY) is None


def test_a_put_entry_comes_back_verified_and_counts_a_remote_hit(redis_server):
    tier, blob = make_tier(redis_server), make_entry_blob(KEY)
    tier.put(entry.unpack(blob, KEY))
    assert tier.get(KEY).blob == blob
    assert dgemm.jit.stats()["remote_hits"] == 1


def _flip_a_bit(blob):
    return blob[:100] + bytes([blob[100] ^ 1]) + blob[101:]


@pytest.mark.parametrize("damage", [_flip_a_bit, lambda blob: blob[:-7],
                                    lambda blob: make_entry_blob("e2" * 32)],
                         ids=["bit-flip", "truncated", "wrong-key"])
def test_a_damaged_remote_value_is_refused_and_deleted(redis_server, damage):
    tier = make_tier(redis_server)
    redis_server.client().set("t:entry:" + KEY, damage(make_entry_blob(KEY)))
    assert tier.get(KEY) is None
    assert not redis_server.client().exists("t:entry:" + KEY)
    assert dgemm.jit.stats()["remote_errors"] == 1


def test_an_unsigned_entry_is_refused_when_a_secret_is_set(redis_server):
    tier = make_tier(redis_server, secret=SECRET)
    redis_server.client().set("t:entry:" + KEY, make_entry_blob(KEY))
    assert tier.get(KEY) is None


def test_an_entry_signed_with_the_secret_is_accepted(redis_server):
    tier, blob = make_tier(redis_server, secret=SECRET), make_entry_blob(KEY, secret=SECRET)
    tier.put(entry.unpack(blob, KEY, SECRET))
    assert tier.get(KEY).blob == blob


def test_a_refused_value_replaced_meanwhile_is_not_deleted(redis_server):
    tier, good = make_tier(redis_server), make_entry_blob(KEY)
    tier.put(entry.unpack(good, KEY))
    assert tier.cache.store.discard(KEY, _flip_a_bit(good)) is False
    assert redis_server.client().get("t:entry:" + KEY) == good


def test_a_hit_refreshes_the_entry_ttl(redis_server):
    tier = make_tier(redis_server, settings=RemoteSettings(entry_ttl_s=100))
    tier.put(entry.unpack(make_entry_blob(KEY), KEY))
    redis_server.client().pexpire("t:entry:" + KEY, 1000)
    tier.get(KEY)
    assert redis_server.client().pttl("t:entry:" + KEY) > 90_000


def test_get_never_raises_when_redis_is_down(redis_server):
    tier = make_tier(redis_server)
    redis_server.kill()
    assert tier.get(KEY) is None
    assert tier.cache.breaker.state == OPEN


# --- single flight -----------------------------------------------------------------------------
def test_a_miss_is_built_once_and_published(redis_server):
    tier, build = make_tier(redis_server), CountingBuild(make_entry_blob(KEY))
    built, here = tier.single_flight(KEY, build)
    assert here is True and built.blob == build.blob and build.count == 1
    assert redis_server.client().get("t:entry:" + KEY) == build.blob


def test_a_published_entry_is_downloaded_instead_of_built(redis_server):
    make_tier(redis_server).put(entry.unpack(make_entry_blob(KEY), KEY))
    build = CountingBuild(make_entry_blob(KEY))
    assert make_tier(redis_server).single_flight(KEY, build)[1] is False
    assert build.count == 0


def test_a_waiter_gets_the_owners_blob_when_it_is_published(redis_server):
    # A 60 s lease: the waiter must be woken by the notification (or its re-check, at most a
    # second later), not by the lease expiring.
    slow_recheck = RemoteSettings(timeout_s=2.0, cooldown_s=60, lease_ttl_s=60.0, max_wait_s=120)
    blob = make_entry_blob(KEY)
    owner_build, waiter_build = CountingBuild(blob, seconds=0.5), CountingBuild(blob)
    owner = threading.Thread(target=make_tier(redis_server, settings=slow_recheck).single_flight,
                             args=(KEY, owner_build))
    owner.start()
    deadline = time.monotonic() + 30
    while not redis_server.client().exists("t:lease:" + KEY):
        assert time.monotonic() < deadline, "the owner never took the lease"
        time.sleep(0.01)
    started = time.monotonic()
    got = make_tier(redis_server, settings=slow_recheck).single_flight(KEY, waiter_build)
    owner.join()
    assert got[0].blob == blob and got[1] is False
    assert (owner_build.count, waiter_build.count) == (1, 0)
    assert time.monotonic() - started < 10      # not by the lease expiring
    assert dgemm.jit.stats()["waits"] == 1


def test_a_waiter_takes_over_when_the_owner_dies_without_publishing(redis_server):
    # The dead owner's lease runs 1 s more; a waiter that did not take over when it expired
    # would wait out its 120 s maximum wait.
    slow_recheck = RemoteSettings(timeout_s=2.0, cooldown_s=60, lease_ttl_s=60.0, max_wait_s=120)
    redis_server.client().set("t:lease:" + KEY, "dead-owner", px=1000)
    build = CountingBuild(make_entry_blob(KEY))
    started = time.monotonic()
    assert make_tier(redis_server, settings=slow_recheck).single_flight(KEY, build)[1] is True
    assert build.count == 1 and time.monotonic() - started < 10


def test_an_owner_that_raises_releases_the_lease_at_once(redis_server):
    tier = make_tier(redis_server)
    with pytest.raises(KeyboardInterrupt):
        tier.single_flight(KEY, CountingBuild(b"", error=KeyboardInterrupt()))
    assert not redis_server.client().exists("t:lease:" + KEY)


def test_a_compile_failure_is_replayed_to_other_nodes_with_its_log(redis_server):
    failing = CountingBuild(b"", error=CompileError("nvrtc: 1 error", log="x.cu(3): error"))
    with pytest.raises(CompileError):
        make_tier(redis_server).single_flight(KEY, failing)
    other = CountingBuild(make_entry_blob(KEY))
    with pytest.raises(CompileError) as replayed:
        make_tier(redis_server).single_flight(KEY, other)
    assert other.count == 0 and replayed.value.log == "x.cu(3): error"
    message = str(replayed.value)
    assert "nvrtc: 1 error" in message and "failed on another node" in message
    assert "DGEMM_REMOTE_FAIL_TTL" in message


def test_a_failure_without_a_compiler_log_is_not_replayed(redis_server):
    broken_install = CountingBuild(b"", error=CompileError("NVRTC is unavailable"))
    with pytest.raises(CompileError):
        make_tier(redis_server).single_flight(KEY, broken_install)
    other = CountingBuild(make_entry_blob(KEY))
    make_tier(redis_server).single_flight(KEY, other)
    assert other.count == 1


def test_a_waiter_gives_up_after_the_max_wait_and_builds_locally(redis_server):
    # The owner holds its lease for 60 s more and never publishes: only the 1 s maximum wait
    # can end the wait within the bound.
    redis_server.client().set("t:lease:" + KEY, "slow-owner", px=60_000)
    settings = RemoteSettings(timeout_s=2.0, lease_ttl_s=60.0, max_wait_s=1.0)
    build = CountingBuild(make_entry_blob(KEY))
    started = time.monotonic()
    make_tier(redis_server, settings=settings).single_flight(KEY, build)
    assert build.count == 1 and 1.0 <= time.monotonic() - started < 10


# --- Redis trouble -----------------------------------------------------------------------------
def test_a_dead_redis_falls_back_to_building_locally_and_opens_the_breaker(redis_server):
    tier, build = make_tier(redis_server), CountingBuild(make_entry_blob(KEY))
    redis_server.kill()
    assert blob_of(tier.single_flight(KEY, build)) == build.blob
    assert tier.cache.breaker.state == OPEN and dgemm.jit.stats()["remote_errors"] == 1


def test_a_paused_redis_costs_at_most_one_timeout(redis_server):
    one_timeout = RemoteSettings(timeout_s=2.0, cooldown_s=60, lease_ttl_s=1.0, max_wait_s=10)
    tier = make_tier(redis_server, settings=one_timeout)
    build = CountingBuild(make_entry_blob(KEY))
    tier.get("00" * 32)          # an established connection, as in a running job
    redis_server.pause()
    try:
        started = time.monotonic()
        tier.single_flight(KEY, build)
        elapsed = time.monotonic() - started
    finally:
        redis_server.resume()
    # One call timed out and opened the breaker, which refused the rest without trying.
    assert build.count == 1 and dgemm.jit.stats()["remote_errors"] == 1
    assert tier.cache.breaker.state == OPEN and elapsed < 2 * one_timeout.timeout_s


def test_an_open_breaker_skips_redis_entirely(redis_server):
    tier = make_tier(redis_server)
    redis_server.kill()
    tier.single_flight("00" * 32, CountingBuild(make_entry_blob("00" * 32)))
    requests_sent = tier.cache.calls
    build = CountingBuild(make_entry_blob(KEY))
    tier.single_flight(KEY, build)
    assert build.count == 1 and tier.cache.calls == requests_sent     # no request at all


def test_entries_built_during_an_outage_are_uploaded_when_redis_returns(redis_server):
    settings = RemoteSettings(timeout_s=0.5, cooldown_s=0.2, lease_ttl_s=1.0)
    tier, blob = make_tier(redis_server, settings=settings), make_entry_blob(KEY)
    redis_server.kill()
    tier.single_flight(KEY, CountingBuild(blob))
    assert tier.cache.pending_uploads == 1
    redis_server.start()
    time.sleep(0.3)
    other = "f0" * 32
    tier.single_flight(other, CountingBuild(make_entry_blob(other)))
    assert tier.cache.breaker.state == CLOSED and tier.cache.pending_uploads == 0
    assert redis_server.client().get("t:entry:" + KEY) == blob
    assert redis_server.client().exists("t:entry:" + other)


# --- configuration -----------------------------------------------------------------------------
def test_no_remote_tier_without_dgemm_remote_cache():
    assert from_env() is None


def test_from_env_reads_url_namespace_and_bounds(monkeypatch, redis_server):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("DGEMM_REMOTE_NAMESPACE", "team-a")
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.25")
    cache = from_env().cache
    assert cache.namespace.prefix == "team-a" and cache.settings.timeout_s == 0.25
    assert cache.client.connection_pool.connection_kwargs["socket_timeout"] == 0.25


def test_a_malformed_timeout_names_the_variable(monkeypatch, redis_server):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "two seconds")
    with pytest.raises(ConfigError, match="DGEMM_REMOTE_TIMEOUT"):
        from_env()


def test_an_acl_user_from_the_url_can_publish_and_download(tmp_path):
    server = RedisServer(tmp_path / "acl", user=("trainer", "pa55word")).start()
    try:
        tier, build = make_tier(server), CountingBuild(make_entry_blob(KEY))
        tier.single_flight(KEY, build)
        assert make_tier(server).get(KEY).blob == build.blob
    finally:
        server.stop()


def test_a_rejected_password_opens_the_breaker_and_the_build_runs_locally(tmp_path):
    server = RedisServer(tmp_path / "acl", user=("trainer", "pa55word")).start()
    try:
        wrong = RemoteTier.connect(server.url.replace("pa55word", "guess"), "t", FAST, None)
        build = CountingBuild(make_entry_blob(KEY))
        assert blob_of(wrong.single_flight(KEY, build)) == build.blob
        assert wrong.cache.breaker.state == OPEN and build.count == 1
    finally:
        server.stop()


def test_a_rediss_url_with_a_ca_certificate_talks_tls(tmp_path):
    server = RedisServer(tmp_path / "tls", tls=True).start()
    try:
        tier, blob = make_tier(server), make_entry_blob(KEY)
        tier.put(entry.unpack(blob, KEY))
        assert tier.get(KEY).blob == blob and tier.cache.breaker.state == CLOSED
    finally:
        server.stop()


def test_logged_urls_hide_the_password():
    assert redact("redis://trainer:pa55word@cache:6379/0") == "redis://trainer:***@cache:6379/0"
    assert redact("redis://cache:6379/0") == "redis://cache:6379/0"
    assert redact("redis://:pa55word@[::1]:6379/0") == "redis://:***@[::1]:6379/0"
