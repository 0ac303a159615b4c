"""A redis-py client from a URL, with a hard bound on every call.

    redis://[user:password@]host:port/db      plain TCP; user and password for ACL auth
    rediss://...?ssl_ca_certs=/path/ca.pem    TLS (certificate options as URL query arguments)
    unix:///run/redis.sock?db=0               a local socket

Every connection gets the same connect and read timeout and no retries, so one call fails
after at most `timeout` seconds (plus a connect of at most `timeout` on a fresh connection)
instead of redis-py's default of several retried attempts.
"""
from __future__ import annotations

import inspect
import urllib.parse

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

DEFAULT_TIMEOUT_S = 2.0

# No CLIENT SETINFO on connect: one round trip less per connection. redis-py >= 7 spells it
# driver_info=None (lib_name/lib_version are deprecated there); older versions only know those.
_NO_CLIENT_SETINFO = (
    {"driver_info": None}
    if "driver_info" in inspect.signature(redis.connection.AbstractConnection.__init__).parameters
    else {"lib_name": None, "lib_version": None})


def connect(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> redis.Redis:
    """A client for `url` whose every call gives up after `timeout` seconds. Connecting is
    lazy: a wrong URL or a down server shows up on the first command, as a `redis.RedisError`."""
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"Redis timeout must be a positive number of seconds; got {timeout!r}")
    try:
        return redis.Redis.from_url(
            url,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            retry=Retry(NoBackoff(), 0),       # the circuit breaker decides when to try again
            health_check_interval=0,
            **_NO_CLIENT_SETINFO,
        )
    except ValueError as error:
        raise ValueError(f"cannot use Redis URL {redact(url)!r}: {error}. Expected "
                         f"redis://[user:password@]host:port/db, rediss://... for TLS or "
                         f"unix:///path/to/socket") from error


def redact(url: str) -> str:
    """`url` with its password replaced by '***', for logs and error messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]          # host[:port] as written ([::1] keeps brackets)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
