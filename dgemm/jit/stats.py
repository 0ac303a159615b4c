"""Process-wide counters of the cache walk: `incr(name, amount)`, `snapshot()`, `reset()`.

    memory_hits, disk_hits, remote_hits   a tier answered
    compiles, compile_seconds             this process compiled (and how long it took)
    waits                                 this process waited for another's compile: on the
                                          node's per-key lock (cache.py) or on the cluster
                                          lease (the remote tier)
    remote_errors                         Redis calls that failed, or remote entries refused
    decision_memory_hits, decision_disk_hits, decision_remote_hits
                                          a tier answered with a decision (dgemm.jit.decisions)
    decision_waits                        this process waited for another's decision
    decisions_refused                     decisions refused (corrupt, forged, unsigned with a
                                          secret, or naming a kernel this build cannot run)
    autotune_timings                      shape classes this process timed (dgemm.autotune)
    autotune_fallbacks                    calls that used the heuristic's kernel because no
                                          decision could be had (timeout, refusal, capture
                                          without a decision, a failed timing)

The counters live in `state.table("jit.stats")`, so `state.reset()` zeroes them with everything
else; `reset()` (public as `dgemm.jit.reset_stats`) zeroes only them. They are for people and
dashboards: code that needs to know what one call did gets it returned (`cache.Outcome`).

`dgemm.jit.stats()` must be a function while `dgemm.jit.stats` is also this module, so the
module object is made callable: calling it returns `snapshot()`.
"""
from __future__ import annotations

import sys
import threading
import types

from . import state

NAMES = ("memory_hits", "disk_hits", "remote_hits", "compiles", "compile_seconds", "waits",
         "remote_errors", "decision_memory_hits", "decision_disk_hits", "decision_remote_hits",
         "decision_waits", "decisions_refused", "autotune_timings", "autotune_fallbacks")

_lock = threading.Lock()
_counters = state.table("jit.stats")      # name -> value; a missing name is zero


def _zero(name: str):
    return 0.0 if name == "compile_seconds" else 0


def incr(name: str, amount=1) -> None:
    if name not in NAMES:
        raise ValueError(f"unknown stats counter {name!r}; expected one of {', '.join(NAMES)}")
    with _lock:
        _counters[name] = _counters.get(name, _zero(name)) + amount


def snapshot() -> dict:
    with _lock:
        return {name: _counters.get(name, _zero(name)) for name in NAMES}


def reset() -> None:
    """Zero the counters only (the memory tier and every other table stay)."""
    with _lock:
        _counters.clear()


class _CallableModule(types.ModuleType):
    def __call__(self) -> dict:
        return snapshot()


sys.modules[__name__].__class__ = _CallableModule
