"""The circuit breaker, on a fake clock (pure logic: no Redis needed)."""
from __future__ import annotations

import logging

import pytest
import redis

from cache_service.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker, RemoteUnavailable


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _fail():
    raise redis.ConnectionError("Connection refused")


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def breaker(clock):
    return CircuitBreaker("redis://test", cooldown_s=30, clock=clock)


def test_a_redis_error_opens_the_breaker_and_is_reraised_as_remote_unavailable(breaker):
    with pytest.raises(RemoteUnavailable) as raised:
        breaker.call(_fail)
    assert isinstance(raised.value.cause, redis.ConnectionError)
    assert breaker.state == OPEN


def test_an_open_breaker_refuses_calls_without_running_them(breaker):
    with pytest.raises(RemoteUnavailable):
        breaker.call(_fail)
    ran = []
    with pytest.raises(RemoteUnavailable) as refused:
        breaker.call(lambda: ran.append(1))
    assert ran == [] and refused.value.cause is None


def test_after_the_cooldown_one_probe_is_let_through_and_success_closes(breaker, clock):
    with pytest.raises(RemoteUnavailable):
        breaker.call(_fail)
    clock.now += 30
    assert breaker.state == HALF_OPEN
    assert breaker.call(lambda: "pong") == "pong"
    assert breaker.state == CLOSED


def test_a_failed_probe_reopens_for_another_cooldown(breaker, clock):
    with pytest.raises(RemoteUnavailable):
        breaker.call(_fail)
    clock.now += 31
    with pytest.raises(RemoteUnavailable):
        breaker.call(_fail)
    clock.now += 29
    assert breaker.state == OPEN


def test_only_one_warning_is_logged_per_outage(breaker, clock, caplog):
    caplog.set_level(logging.DEBUG, logger="dgemm.remote")
    for _ in range(3):
        with pytest.raises(RemoteUnavailable):
            breaker.call(_fail)
        clock.now += 31
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "redis://test" in warnings[0].getMessage()


def test_a_non_redis_exception_passes_through_and_does_not_open(breaker):
    with pytest.raises(KeyError):
        breaker.call(lambda: {}["missing"])
    assert breaker.state == CLOSED
