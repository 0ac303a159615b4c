"""The circuit breaker, on a fake clock (pure logic: no Redis needed)."""
from __future__ import annotations

import logging

import pytest
import redis

from cache_service.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker, RemoteUnavailable
from cache_service.errors import DamagedKey, LeaseNotOwnedError, RemoteFull, UnexpectedReply


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


def test_any_exception_of_the_operation_opens_the_breaker_as_remote_unavailable(breaker):
    # What a server that is not Redis makes redis-py raise (issue 15, defect 6).
    with pytest.raises(RemoteUnavailable, match="really Redis") as raised:
        breaker.call(lambda: b"OK".decode()[0].missing_attribute)
    assert isinstance(raised.value.cause, AttributeError)
    assert breaker.state == OPEN


def test_an_unexpected_reply_opens_the_breaker(breaker):
    def proxy_answering_ok():
        raise UnexpectedReply("lease script: the server replied b'OK'")
    with pytest.raises(RemoteUnavailable, match="lease script"):
        breaker.call(proxy_answering_ok)
    assert breaker.state == OPEN


@pytest.mark.parametrize("answer", [LeaseNotOwnedError("lost"), DamagedKey("dgemm:meta")],
                         ids=["lease-not-owned", "damaged-key"])
def test_answers_of_a_healthy_redis_pass_through_and_leave_it_closed(breaker, answer):
    def answered():
        raise answer
    with pytest.raises(type(answer)):
        breaker.call(answered)
    assert breaker.state == CLOSED


def test_a_write_refused_at_maxmemory_is_remote_full_and_leaves_it_closed(breaker, clock,
                                                                          caplog):
    def refused():
        raise redis.exceptions.OutOfMemoryError(
            "command not allowed when used memory > 'maxmemory'.")
    caplog.set_level(logging.DEBUG, logger="dgemm.remote")
    for _ in range(3):
        with pytest.raises(RemoteFull):
            breaker.call(refused)
        clock.now += 1
    assert breaker.state == CLOSED and breaker.call(lambda: "pong") == "pong"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "maxmemory" in warnings[0].getMessage()


def test_a_keyboard_interrupt_passes_through_and_does_not_open(breaker):
    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        breaker.call(interrupted)
    assert breaker.state == CLOSED
