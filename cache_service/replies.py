"""Checks on what the server replied, so that a server that speaks Redis's protocol but is not
Redis (a proxy answering `+OK` or `:1` to everything) fails with a clear UnexpectedReply, which
the circuit breaker treats as the remote being unavailable, instead of an AttributeError deep
in the caller; and a key of the wrong type (WRONGTYPE) becomes a DamagedKey that names the key
and its repair.

Each check returns the reply as the caller will use it, or raises.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import redis

from .errors import DamagedKey, UnexpectedReply


def shown(reply) -> str:
    """`reply` for a message: its repr, cut at 60 characters."""
    text = repr(reply)
    return text if len(text) <= 60 else text[:57] + "..."


def unexpected(what: str, reply, expected: str) -> UnexpectedReply:
    return UnexpectedReply(f"{what}: the server replied {shown(reply)}, where Redis replies "
                           f"{expected}; is the server at this address really Redis?")


def blob_or_none(reply, what: str):
    if reply is None or isinstance(reply, bytes):
        return reply
    raise unexpected(what, reply, "a string or nil")


def integer(reply, what: str) -> int:
    if isinstance(reply, int) and not isinstance(reply, bool):
        return reply
    raise unexpected(what, reply, "an integer")


def flag(reply, what: str) -> bool:
    """A script's 0 or 1."""
    if integer(reply, what) in (0, 1):
        return bool(reply)
    raise unexpected(what, reply, "0 or 1")


def array(reply, what: str) -> list:
    if isinstance(reply, list):
        return reply
    raise unexpected(what, reply, "an array")


def is_wrongtype(error: BaseException) -> bool:
    return isinstance(error, redis.ResponseError) and str(error).startswith("WRONGTYPE")


def damaged(key: str, kind: str, holds: str, cause: BaseException = None) -> DamagedKey:
    return DamagedKey(f"Redis key {key!r} is not a {kind}: something other than this cache "
                      f"wrote it. It holds only {holds}; delete it (redis-cli DEL {key}) and "
                      f"the cache recreates it", cause=cause)


@contextlib.contextmanager
def key_of_type(key: str, kind: str, holds: str) -> Iterator[None]:
    """Turn WRONGTYPE from the commands inside into DamagedKey naming `key`."""
    try:
        yield
    except redis.ResponseError as error:
        if is_wrongtype(error):
            raise damaged(key, kind, holds, cause=error) from error
        raise
