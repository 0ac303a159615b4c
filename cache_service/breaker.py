"""Circuit breaker: after a Redis failure, stop asking Redis for a while.

    closed --failure--> open --cool-down elapsed--> half-open --probe ok--> closed
                          ^                             |
                          +--------probe fails----------+

While open, calls are refused at once (no network), so a dead or paused Redis costs each
process one timeout per cool-down instead of one per kernel. One warning per outage; the
recovery is logged at info. The clock is injectable for tests.

Logs go to the "dgemm.remote" logger, the name users of the cache already configure.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, TypeVar

import redis

from .errors import RemoteUnavailable

logger = logging.getLogger("dgemm.remote")

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"
DEFAULT_COOLDOWN_S = 30.0

T = TypeVar("T")


class CircuitBreaker:
    def __init__(self, name: str, cooldown_s: float = DEFAULT_COOLDOWN_S,
                 clock: Callable[[], float] = time.monotonic):
        self.name = name                   # shown in log lines, e.g. a redacted URL
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state = CLOSED
        self._opened_at = 0.0
        self._probing = False              # a half-open probe is in flight

    @property
    def state(self) -> str:
        with self._lock:
            if self._state == OPEN and self._cooled_down():
                return HALF_OPEN
            return self._state

    def call(self, operation: Callable[[], T]) -> T:
        """Run `operation` (which talks to Redis) unless the breaker is open. A `RedisError`
        opens the breaker and comes back as `RemoteUnavailable`; so does a refusal."""
        probe = self._admit()
        try:
            result = operation()
        except redis.RedisError as error:
            self._record_failure(error)
            raise RemoteUnavailable(f"{self.name}: {type(error).__name__}: {error}",
                                    cause=error) from error
        except BaseException:
            if probe:
                with self._lock:
                    self._probing = False
            raise
        self._record_success()
        return result

    # ---------------------------------------------------------------------------------------
    def _admit(self) -> bool:
        """True when this call is the half-open probe; RemoteUnavailable when refused."""
        with self._lock:
            if self._state == CLOSED:
                return False
            if self._cooled_down() and not self._probing:
                self._probing = True
                return True
        raise RemoteUnavailable(f"{self.name}: not tried (circuit open after a failure)")

    def _cooled_down(self) -> bool:
        return self._clock() - self._opened_at >= self.cooldown_s

    def _record_failure(self, error: BaseException) -> None:
        with self._lock:
            was_closed = self._state == CLOSED
            self._state, self._opened_at, self._probing = OPEN, self._clock(), False
        if was_closed:
            logger.warning("dgemm: remote cache %s is unavailable (%s: %s); building locally "
                           "and trying it again in %g s", self.name, type(error).__name__,
                           error, self.cooldown_s)
        else:
            logger.debug("dgemm: remote cache %s still unavailable (%s)", self.name, error)

    def _record_success(self) -> None:
        with self._lock:
            recovered = self._state != CLOSED
            self._state, self._probing = CLOSED, False
        if recovered:
            logger.info("dgemm: remote cache %s is reachable again", self.name)
