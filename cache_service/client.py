"""A redis-py client from a URL, with a hard bound on every call.

    redis://[user:password@]host:port/db      plain TCP; user and password for ACL auth
    rediss://...?ssl_ca_certs=/path/ca.pem    TLS (certificate options as URL query arguments)
    unix:///run/redis.sock?db=0               a local socket

Every connection gets the same connect and read timeout and no retries, so one call fails
after at most `timeout` seconds (plus a connect of at most `timeout` on a fresh connection)
instead of redis-py's default of several retried attempts. Every new connection first checks
that the server is Redis (PING with a random message, which Redis echoes): a proxy or another
service that speaks Redis's protocol fails there with NotRedisError, before any command whose
reply it could fake (a `:1` to every request would read as a successful store).
"""
from __future__ import annotations

import inspect
import re
import secrets
import urllib.parse

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .replies import shown

DEFAULT_TIMEOUT_S = 2.0

# No CLIENT SETINFO on connect: one round trip less per connection. redis-py >= 7 spells it
# driver_info=None (lib_name/lib_version are deprecated there); older versions only know those.
_NO_CLIENT_SETINFO = (
    {"driver_info": None}
    if "driver_info" in inspect.signature(redis.connection.AbstractConnection.__init__).parameters
    else {"lib_name": None, "lib_version": None})


SCHEMES = ("redis", "rediss", "unix")
EXPECTED_FORMS = ("redis://[user:password@]host:port/db (db a number, default 0), rediss://... "
                  "for TLS or unix:///path/to/socket?db=0")
MAX_TIMEOUT_S = 86400.0         # socket timeouts beyond a day overflow some platforms' timeval
_DB_PATH = re.compile(r"/?[0-9]*")


class NotRedisError(redis.ConnectionError):
    """The server answered the connection check as Redis never does."""


def _connect_to_redis_only(connection) -> None:
    """redis-py's connection set-up (HELLO or AUTH, SELECT, ...), then the check that the
    server is Redis. Raises only RedisErrors, so that redis-py drops the connection."""
    nonce = secrets.token_hex(8)
    try:
        connection.on_connect()
        connection.send_command("PING", nonce)
        reply = connection.read_response()
    except redis.RedisError:
        raise
    except Exception as error:      # a set-up reply redis-py could not use (e.g. to HELLO)
        raise NotRedisError(f"the server is not Redis: its reply to the connection set-up "
                            f"made redis-py fail ({type(error).__name__}: {error}); is the "
                            f"server at this address really Redis?") from error
    if reply != nonce.encode():
        raise NotRedisError(f"the server is not Redis: it answered PING {nonce} with "
                            f"{shown(reply)} instead of the message; is the server at this "
                            f"address really Redis?")


def check_url(url: str) -> None:
    """Raises ValueError, saying what is wrong, unless `url` is a Redis URL that `connect`
    takes as written (redis-py itself reads `redis://host/abc` as database 0, and
    `redis://host/0/1` as database 1)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port                      # ValueError for a port that is not 0-65535
    except ValueError as error:
        raise ValueError(str(error)) from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"the scheme must be one of {', '.join(SCHEMES)}")
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError("a unix:// URL needs the socket's path")
    elif not _DB_PATH.fullmatch(parts.path):
        raise ValueError(f"the database {parts.path.lstrip('/')!r} is not a database number "
                         f"(0, 1, 2, ...)")
    try:
        options = redis.connection.parse_url(url)
    except ValueError as error:
        raise ValueError(str(error).rstrip(".")) from None
    if options.get("db", 0) < 0:
        raise ValueError("the database number must not be negative")


def connect(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> redis.Redis:
    """A client for `url` whose every call gives up after `timeout` seconds (at most a day).
    Connecting is lazy: a down server shows up on the first command, as a `redis.RedisError`;
    a malformed URL is a ValueError here."""
    if not (isinstance(timeout, (int, float)) and 0 < timeout <= MAX_TIMEOUT_S):
        raise ValueError(f"Redis timeout must be a number of seconds above 0 and at most "
                         f"{MAX_TIMEOUT_S:g}; got {timeout!r}")
    try:
        check_url(url)
        return redis.Redis.from_url(
            url,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            retry=Retry(NoBackoff(), 0),       # the circuit breaker decides when to try again
            health_check_interval=0,
            redis_connect_func=_connect_to_redis_only,
            **_NO_CLIENT_SETINFO,
        )
    except ValueError as error:
        raise ValueError(f"cannot use Redis URL {redact(url)!r}: {error}. Expected "
                         f"{EXPECTED_FORMS}") from error


def redact(url: str) -> str:
    """`url` with its password replaced by '***', for logs and error messages."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:                  # malformed: hide everything before the host
        scheme, sep, rest = url.partition("://")
        host = rest.rpartition("@")[2]
        return f"{scheme}{sep}***@{host}" if "@" in rest else url
    if password is None:
        return url
    host = parts.netloc.rpartition("@")[2]          # host[:port] as written ([::1] keeps brackets)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
