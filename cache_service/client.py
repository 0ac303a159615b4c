"""A redis-py client from a URL, with a hard bound on every call.

    redis://[user:password@]host:port/db      plain TCP; user and password for ACL auth
    rediss://...?ssl_ca_certs=/path/ca.pem    TLS (certificate options as URL query arguments)
    unix:///run/redis.sock?db=0               a local socket
    redis+sentinel://[user:password@]host1[:port],host2[:port]/service[/db]
                                              a highly available Redis behind Sentinel: the
                                              sentinels (port 26379 unless given) name the
                                              current primary of `service`; user and password
                                              are the primary's, `?sentinel_password=...`
                                              (and `sentinel_username`) the sentinels' own

Every connection gets the same connect and read timeout and no retries, so one call fails
after at most `timeout` seconds (plus a connect of at most `timeout` on a fresh connection)
instead of redis-py's default of several retried attempts. Through Sentinel a fresh connection
first asks the sentinels, one after the other, for the primary (each question bounded the
same way), so it takes at most one more `timeout` per sentinel listed; after a failover the
next fresh connection finds the new primary. Every new connection to a Redis that holds data
first checks that the server is Redis (PING with a random message, which Redis echoes): a proxy
or another service that speaks Redis's protocol fails there with NotRedisError, before any
command whose reply it could fake (a `:1` to every request would read as a successful store).
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import secrets
import urllib.parse
from typing import Optional

import redis
import redis.sentinel
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


SENTINEL_SCHEME = "redis+sentinel"
SCHEMES = ("redis", "rediss", "unix", SENTINEL_SCHEME)
EXPECTED_FORMS = ("redis://[user:password@]host:port/db (db a number, default 0), rediss://... "
                  "for TLS, unix:///path/to/socket?db=0, or "
                  "redis+sentinel://[user:password@]host1:26379,host2:26379/service/db for a "
                  "Redis behind Sentinel")
DEFAULT_SENTINEL_PORT = 26379
_SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
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
    if url.startswith(SENTINEL_SCHEME + "://"):
        parse_sentinel_url(url)
        return
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


@dataclasses.dataclass(frozen=True)
class SentinelURL:
    """A parsed redis+sentinel:// URL."""
    sentinels: tuple                    # ((host, port), ...)
    service: str                        # the name the sentinels monitor the primary under
    db: int = 0
    username: Optional[str] = None      # the primary's credentials
    password: Optional[str] = None
    sentinel_username: Optional[str] = None
    sentinel_password: Optional[str] = None


def parse_sentinel_url(url: str) -> SentinelURL:
    """`redis+sentinel://[user:password@]host1[:port],host2[:port]/service[/db]` with the
    optional query options sentinel_username and sentinel_password; ValueError saying what is
    wrong."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        raise ValueError(f"the scheme must be {SENTINEL_SCHEME}")
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    path = parts.path.strip("/").split("/") if parts.path.strip("/") else []
    if not path or not path[0]:
        raise ValueError("a redis+sentinel URL needs the service name the sentinels monitor, "
                         "e.g. redis+sentinel://host:26379/mymaster/0")
    if len(path) > 2 or (len(path) == 2 and not re.fullmatch("[0-9]+", path[1])):
        raise ValueError(f"after the service name comes only a database number; got "
                         f"{'/'.join(path[1:])!r}")
    options = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(options) - set(_SENTINEL_OPTIONS))
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r}; a redis+sentinel URL takes only "
                         f"{' and '.join(_SENTINEL_OPTIONS)}")
    return SentinelURL(
        sentinels=tuple(_host_and_port(host) for host in hosts.split(",")),
        service=urllib.parse.unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=urllib.parse.unquote(username) or None,
        password=urllib.parse.unquote(password) or None,
        **{name: options[name][-1] or None for name in options})


def _host_and_port(text: str) -> tuple:
    """(host, port) of one `host[:port]` or `[v6]:port` of a sentinel list."""
    if not text:
        raise ValueError("an empty sentinel address (two commas, or none at all)")
    try:
        parts = urllib.parse.urlsplit(f"//{text}")
        port = parts.port
    except ValueError as error:
        raise ValueError(f"sentinel address {text!r}: {error}") from None
    if not parts.hostname:
        raise ValueError(f"sentinel address {text!r} has no host")
    return parts.hostname, port or DEFAULT_SENTINEL_PORT


def connect(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> redis.Redis:
    """A client for `url` whose every call gives up after `timeout` seconds (at most a day).
    Connecting is lazy: a down server shows up on the first command, as a `redis.RedisError`;
    a malformed URL is a ValueError here."""
    if not (isinstance(timeout, (int, float)) and 0 < timeout <= MAX_TIMEOUT_S):
        raise ValueError(f"Redis timeout must be a number of seconds above 0 and at most "
                         f"{MAX_TIMEOUT_S:g}; got {timeout!r}")
    try:
        check_url(url)
        if url.startswith(SENTINEL_SCHEME + "://"):
            return _connect_through_sentinels(parse_sentinel_url(url), timeout)
        return redis.Redis.from_url(url, redis_connect_func=_connect_to_redis_only,
                                    **_bounded(timeout))
    except ValueError as error:
        raise ValueError(f"cannot use Redis URL {redact(url)!r}: {error}. Expected "
                         f"{EXPECTED_FORMS}") from error


def _bounded(timeout: float) -> dict:
    """The connection options that bound every call and make no retries."""
    return dict(socket_connect_timeout=timeout, socket_timeout=timeout,
                retry=Retry(NoBackoff(), 0),       # the circuit breaker decides when to retry
                health_check_interval=0, **_NO_CLIENT_SETINFO)


def _connect_through_sentinels(address: SentinelURL, timeout: float) -> redis.Redis:
    """A client of `address.service`'s current primary; each fresh connection asks the
    sentinels where it is. Sentinels are not checked with PING <message> (they are not the
    store); the primary they name is."""
    sentinels = _Sentinels(list(address.sentinels),
                         sentinel_kwargs=dict(_bounded(timeout),
                                              username=address.sentinel_username,
                                              password=address.sentinel_password))
    return sentinels.master_for(address.service, redis_class=redis.Redis, db=address.db,
                                username=address.username, password=address.password,
                                redis_connect_func=_connect_to_redis_only, **_bounded(timeout))


def redact(url: str) -> str:
    """`url` with its passwords (the user's, and a sentinel_password option) replaced by
    '***', for logs and error messages."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:                  # malformed: hide everything before the host
        scheme, sep, rest = url.partition("://")
        host = rest.rpartition("@")[2]
        return f"{scheme}{sep}***@{host}" if "@" in rest else url
    if password is None and "sentinel_password" not in parts.query:
        return url                      # as written (urlunsplit would respell unix:///path)
    if password is not None:
        host = parts.netloc.rpartition("@")[2]      # host[:port] as written ([::1] keeps brackets)
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    return urllib.parse.urlunsplit(parts._replace(
        query=re.sub(r"(^|&)(sentinel_password=)[^&]*", r"\1\2***", parts.query)))



class _Sentinels(redis.sentinel.Sentinel):
    """redis-py's Sentinel whose "no primary" error names the sentinels asked, rather than
    holding the repr of every connection pool (hundreds of characters each)."""

    def discover_master(self, service_name):
        try:
            return super().discover_master(service_name)
        except redis.sentinel.MasterNotFoundError:
            asked = ", ".join("{host}:{port}".format_map(sentinel.connection_pool.connection_kwargs)
                              for sentinel in self.sentinels)
            raise redis.sentinel.MasterNotFoundError(
                f"no sentinel of {asked} named a primary for service {service_name!r} (each "
                f"is down, unreachable, refused us, or does not monitor that service)") from None
