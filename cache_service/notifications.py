"""Blocking waits on the notification channels (pub/sub), with a bound.

Subscribe first, then check the state you are waiting on, then wait: a publication that
happens between the check and the wait is already queued on the subscription, so it is never
missed. Pub/sub is fire-and-forget, so every wait is bounded and followed by a re-check.
"""
from __future__ import annotations

import time
from typing import Optional

import redis

from . import replies


class Subscription:
    def __init__(self, client: redis.Redis, channels: tuple = (), patterns: tuple = ()):
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._channels = channels
        self._patterns = patterns

    def open(self) -> None:
        """Subscribe (one round trip; raises redis.RedisError when Redis is unavailable)."""
        if self._channels:
            self._pubsub.subscribe(*self._channels)
        if self._patterns:
            self._pubsub.psubscribe(*self._patterns)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._pubsub.close()
        except Exception:
            pass        # closing a connection to a dead (or strange) server has nothing left to do

    def wait(self, timeout_s: float) -> Optional[tuple]:
        """The next (channel, message) as strings, or None after `timeout_s` seconds."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            # Returns early with None after consuming a subscribe confirmation; loop on.
            message = self._pubsub.get_message(timeout=left)
            if message is not None:
                return _text(message, "channel"), _text(message, "data")


def _text(message, field: str) -> str:
    value = message.get(field) if isinstance(message, dict) else None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            pass
    raise replies.unexpected("pub/sub message", message, "a message on a channel")
