"""Lua scripts run by SHA: hashed once here, sent with EVALSHA, loaded only when the server
says it does not know them (first use, or after a restart or SCRIPT FLUSH)."""
from __future__ import annotations

import hashlib

import redis


class LuaScript:
    def __init__(self, source: str):
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, client: redis.Redis, keys: list, args: list):
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)
