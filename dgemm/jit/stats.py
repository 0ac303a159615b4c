"""Process-wide counters of the cache walk: `incr(name, amount)`, `snapshot()`, `reset()`.

    memory_hits, disk_hits, remote_hits   a tier answered
    compiles, compile_seconds             this process compiled (and how long it took)
    waits                                 this process waited for another's compile: on the
                                          node's per-key lock (cache.py) or on the cluster
                                          lease (the remote tier)
    remote_errors                         Redis calls that failed (the remote tier)

`dgemm.jit.stats()` must be a function while `dgemm.jit.stats` is also this module, so the
module object is made callable: calling it returns `snapshot()`.
"""
from __future__ import annotations

import sys
import threading
import types

NAMES = ("memory_hits", "disk_hits", "remote_hits", "compiles", "compile_seconds", "waits",
         "remote_errors")

_lock = threading.Lock()
_counters: dict = {name: 0.0 if name == "compile_seconds" else 0 for name in NAMES}


def incr(name: str, amount=1) -> None:
    if name not in _counters:
        raise ValueError(f"unknown stats counter {name!r}; expected one of {', '.join(NAMES)}")
    with _lock:
        _counters[name] += amount


def snapshot() -> dict:
    with _lock:
        return dict(_counters)


def reset() -> None:
    with _lock:
        for name in NAMES:
            _counters[name] = 0.0 if name == "compile_seconds" else 0


class _CallableModule(types.ModuleType):
    def __call__(self) -> dict:
        return snapshot()


sys.modules[__name__].__class__ = _CallableModule
