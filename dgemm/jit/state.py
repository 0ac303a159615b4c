"""Everything dgemm remembers between calls in this process, in one place with one reset.

Modules do not keep caches in globals of their own: each asks for a named table here once, at
import, and keeps the reference (`_kernels = state.table("loaded_kernels")`). `reset()` empties
every table in place (so those references stay valid) and puts every registered value back to
its default, so tests, forked children and tools that switch settings start from nothing with
one call instead of one hook per module.

Tables hold memoised facts (loaded kernels, tiers, digests, device properties); values hold
settings a user made (`set_num_sms`). Neither is touched on import beyond creating the table.
"""
from __future__ import annotations

import threading
from typing import Any, Dict

_lock = threading.Lock()
_tables: Dict[str, dict] = {}
_values: Dict[str, list] = {}         # name -> [current, default]


def table(name: str) -> dict:
    """The process-wide dict called `name`, created empty on first use."""
    with _lock:
        found = _tables.get(name)
        if found is None:
            found = _tables[name] = {}
        return found


class Value:
    """One process-wide setting (e.g. the SM count set by `set_num_sms`): `get()`, `set(v)`;
    `reset()` restores `default`."""
    __slots__ = ("_cell",)

    def __init__(self, name: str, default: Any = None):
        with _lock:
            cell = _values.get(name)
            if cell is None:
                cell = _values[name] = [default, default]
        self._cell = cell

    def get(self) -> Any:
        return self._cell[0]

    def set(self, value: Any) -> None:
        self._cell[0] = value


def reset() -> None:
    """Forget everything this process remembered: loaded kernels stay loaded in the driver (a
    launch may still use them) but the next call walks the cache tiers again."""
    with _lock:
        for found in _tables.values():
            found.clear()
        for cell in _values.values():
            cell[0] = cell[1]
