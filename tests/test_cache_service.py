"""cache_service on its own, against a real redis-server, with a stand-in application: blobs
are UTF-8 text, `verify` refuses anything not starting with "ok:" and returns the text. Shows
the injected contract (verify once, describe, events, BuildFailed) without dgemm."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from cache_service.client import connect
from cache_service.errors import BuildFailed, CacheServiceError, RemoteUnavailable
from cache_service.namespace import Namespace
from cache_service.remote_cache import ERROR, HIT, WAIT, RemoteCache
from cache_service.settings import RemoteSettings
from redis_server import redis_server  # noqa: F401

KEY = "9a" * 32
# A 60 s lease: a waiter must learn of the owner's outcome from its notification (or its
# re-check, at most a second later), never from the lease expiring.
SETTINGS = RemoteSettings(timeout_s=2.0, cooldown_s=60, lease_ttl_s=60.0, max_wait_s=120,
                          failure_ttl_s=5)


class App:
    """The application side: what RemoteCache is given, and what it called."""

    def __init__(self):
        self.verified, self.events = [], []

    def verify(self, key: str, blob: bytes) -> str:
        self.verified.append(key)
        if not blob.startswith(b"ok:"):
            raise ValueError("not ok")
        return blob.decode()

    @staticmethod
    def describe(blob: bytes) -> dict:
        return {"length_of_text": len(blob) - 3}

    def cache(self, server) -> RemoteCache:
        return RemoteCache(connect(server.url, SETTINGS.timeout_s), self.verify,
                           Namespace("g"), SETTINGS, describe=self.describe,
                           events=self.events.append, name="test")


class FailingBuild(Exception):
    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


def test_importing_cache_service_loads_no_dgemm_module():
    code = ("import sys, cache_service.remote_cache, cache_service.errors\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dgemm'))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_a_download_is_verified_once_and_the_verified_value_returned(redis_server):
    app = App()
    app.cache(redis_server).put(KEY, b"ok:hello")
    assert app.cache(redis_server).get(KEY) == "ok:hello"
    assert app.verified == [KEY] and app.events == [HIT]


def test_a_blob_verify_refuses_is_deleted_and_reads_as_a_miss(redis_server):
    app = App()
    app.cache(redis_server).put(KEY, b"tampered")
    assert app.cache(redis_server).get(KEY) is None
    assert not redis_server.client().exists("g:entry:" + KEY) and app.events == [ERROR]


def test_the_meta_hash_holds_what_describe_returned_and_the_size(redis_server):
    App().cache(redis_server).put(KEY, b"ok:hello")
    meta = json.loads(redis_server.client().hget("g:meta", KEY))
    assert meta == {"length_of_text": 5, "bytes": 8}


def test_a_built_value_is_published_and_returned_without_being_verified(redis_server):
    app = App()
    value, built = app.cache(redis_server).single_flight(KEY, lambda: ("built", b"ok:built"))
    assert (value, built, app.verified) == ("built", True, [])
    assert redis_server.client().get("g:entry:" + KEY) == b"ok:built"


def test_a_failure_with_a_log_is_replayed_to_the_next_node_as_build_failed(redis_server):
    def fail():
        raise FailingBuild("syntax error", log="line 3: expected ';'")

    with pytest.raises(FailingBuild):
        App().cache(redis_server).single_flight(KEY, fail)
    with pytest.raises(BuildFailed) as replayed:
        App().cache(redis_server).single_flight(KEY, lambda: ("never", b"ok:never"))
    assert replayed.value.log == "line 3: expected ';'" and "syntax error" in str(replayed.value)
    assert isinstance(replayed.value, CacheServiceError)


def test_a_failure_without_a_log_releases_the_lease_for_the_next_node(redis_server):
    def fail():
        raise RuntimeError("builder missing")

    with pytest.raises(RuntimeError):
        App().cache(redis_server).single_flight(KEY, fail)
    value, built = App().cache(redis_server).single_flight(KEY, lambda: ("mine", b"ok:mine"))
    assert (value, built) == ("mine", True)


def test_a_waiter_is_woken_by_the_publication_and_reports_one_wait(redis_server):
    owner_in_build, release = threading.Event(), threading.Event()

    def slow_build():
        owner_in_build.set()
        assert release.wait(30)
        return "owner", b"ok:owner"

    owner = threading.Thread(target=App().cache(redis_server).single_flight,
                             args=(KEY, slow_build))
    owner.start()
    assert owner_in_build.wait(30)
    waiter = App()
    threading.Timer(0.2, release.set).start()
    started = time.monotonic()
    value, built = waiter.cache(redis_server).single_flight(KEY, lambda: ("no", b"ok:no"))
    owner.join(30)
    assert (value, built) == ("ok:owner", False) and waiter.events == [WAIT, HIT]
    assert time.monotonic() - started < 10      # not by the lease expiring


def test_remote_unavailable_is_a_cache_service_error_not_a_redis_one(redis_server):
    cache = App().cache(redis_server)
    redis_server.kill()
    with pytest.raises(RemoteUnavailable) as raised:
        cache.download(KEY)
    assert isinstance(raised.value, CacheServiceError) and raised.value.cause is not None
