"""The JIT's logger ("dgemm.jit") and `warning_once` for degraded modes, remembered per process
in `state` (so `state.reset()` lets a warning be given again)."""
from __future__ import annotations

import logging

from . import state

logger = logging.getLogger("dgemm.jit")

_warned = state.table("jit.warned")      # tag -> True once warned


def warning_once(tag: str, message: str, *args) -> None:
    """`logger.warning(message, *args)` the first time `tag` is seen in this process."""
    if _warned.setdefault(tag, False):
        return
    _warned[tag] = True
    logger.warning(message, *args)
