"""Circuit breaker: after a failure of the remote, stop asking it for a while.

    closed --failure--> open --cool-down elapsed--> half-open --probe ok--> closed
                          ^                             |
                          +--------probe fails----------+

While open, calls are refused at once (no network), so a dead or paused Redis costs each
process one timeout per cool-down instead of one per kernel. One warning per outage; the
recovery is logged at info. The clock is injectable for tests.

A failure is any exception of the operation: a Redis error (refused, timeout, authentication),
an UnexpectedReply, or anything a reply that is not Redis's makes redis-py or the caller raise.
Three answers from a healthy Redis are not failures and leave the breaker closed: a lease
fenced out (LeaseNotOwnedError), a damaged key (DamagedKey), and a write refused at maxmemory
(OOM), which comes back as RemoteFull with one warning per cool-down.

Logs go to the "dgemm.remote" logger, the name users of the cache already configure.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, TypeVar

import redis

from .errors import DamagedKey, LeaseNotOwnedError, RemoteFull, RemoteUnavailable, UnexpectedReply

# A logger of its own under dgemm.remote: a command that reports an unreachable remote itself
# (`dgemm-cache push`, exit 3) quiets this one so the outage is not said twice.
logger = logging.getLogger("dgemm.remote.breaker")

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"
DEFAULT_COOLDOWN_S = 30.0

T = TypeVar("T")

# Verdicts of a Redis that answered: passed on as they are, and count as a success.
_ANSWERS = (LeaseNotOwnedError, DamagedKey)


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
        self._full_warned_at = None        # when Redis was last reported full

    @property
    def state(self) -> str:
        with self._lock:
            if self._state == OPEN and self._cooled_down():
                return HALF_OPEN
            return self._state

    def call(self, operation: Callable[[], T]) -> T:
        """Run `operation` (which talks to the remote) unless the breaker is open. Any
        exception of the operation opens the breaker and comes back as `RemoteUnavailable`;
        so does a refusal. See the module docstring for the answers that are not failures."""
        probe = self._admit()
        try:
            result = operation()
        except _ANSWERS:
            self._record_success()
            raise
        except RemoteUnavailable:
            self._end_probe(probe)          # a nested call: already recorded where it failed
            raise
        except Exception as error:
            if _is_out_of_memory(error):
                self._record_success()
                self._warn_full(error)
                raise RemoteFull(f"{self.name}: {error}", cause=error) from error
            opened = self._record_failure(error)
            raise RemoteUnavailable(f"{self.name}: {_describe(error)}", cause=error,
                                    opened_circuit=opened) from error
        except BaseException:
            self._end_probe(probe)
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

    def _end_probe(self, probe: bool) -> None:
        if probe:
            with self._lock:
                self._probing = False

    def _cooled_down(self) -> bool:
        return self._clock() - self._opened_at >= self.cooldown_s

    def _record_failure(self, error: BaseException) -> bool:
        """Open the breaker; True when it was closed until now (the outage is logged once)."""
        with self._lock:
            was_closed = self._state == CLOSED
            self._state, self._opened_at, self._probing = OPEN, self._clock(), False
        if was_closed:
            # Neutral: the caller says what it does without the remote (the walk builds
            # locally, `push` fails); this line only says what happened and when it retries.
            logger.warning("dgemm: remote cache %s is unavailable (%s); not trying it again "
                           "for %g s", self.name, _describe(error), self.cooldown_s)
        else:
            logger.debug("dgemm: remote cache %s still unavailable (%s)", self.name, error)
        return was_closed

    def _record_success(self) -> None:
        with self._lock:
            recovered = self._state != CLOSED
            self._state, self._probing = CLOSED, False
        if recovered:
            logger.info("dgemm: remote cache %s is reachable again", self.name)

    def _warn_full(self, error: BaseException) -> None:
        with self._lock:
            now = self._clock()
            quiet = (self._full_warned_at is not None
                     and now - self._full_warned_at < self.cooldown_s)
            if not quiet:
                self._full_warned_at = now
        if quiet:
            logger.debug("dgemm: remote cache %s is still full (%s)", self.name, error)
        else:
            logger.warning("dgemm: remote cache %s is full (%s); downloads go on, but what is "
                           "built here is not shared until it has room: raise its maxmemory "
                           "or give it an eviction policy such as allkeys-lru", self.name, error)


def _is_authentication_failure(error: BaseException) -> bool:
    return (isinstance(error, redis.AuthenticationError)
            or (isinstance(error, redis.ResponseError)
                and str(error).startswith(("NOAUTH", "WRONGPASS"))))


def _is_out_of_memory(error: BaseException) -> bool:
    # redis-py >= 4 raises OutOfMemoryError for a plain -OOM reply; inside a script, older
    # servers wrap it in an ERR reply that still carries Redis's text.
    return (isinstance(error, getattr(redis.exceptions, "OutOfMemoryError", ()))
            or (isinstance(error, redis.ResponseError)
                and "command not allowed when used memory" in str(error)))


# Redis's replies when the URL lacks the password an ACL or `requirepass` asks for.
_PASSWORD_MISSING = ("NOAUTH", "HELLO must be called with the client already authenticated",
                     "Authentication required")


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if _is_authentication_failure(error):
        if any(reply in str(error) for reply in _PASSWORD_MISSING):
            # Redis's own text here ("HELLO must be called with the client already
            # authenticated, otherwise ...") reads like a client bug; say what it means.
            return (f"Redis requires a password ({type(error).__name__}); give it in the URL "
                    f"as redis://user:password@host:port/db")
        return (f"Redis refused the user name or password ({text}); check the user and "
                f"password in the URL (redis://user:password@host:port/db)")
    if isinstance(error, (redis.RedisError, UnexpectedReply)):
        return text
    # Not an error redis-py means to raise: a reply it could not make sense of.
    return f"unusable reply ({text}); is the server at this address really Redis?"
