"""dgemm's generic JIT: kernel spec -> source -> key -> tiers (memory, disk, remote) -> cubin.

It knows nothing about GEMMs (a CPU test keeps it from importing the layers above it); a spec
is any object of the protocol described in `cache.py`. Process state lives in `state.py`
(`state.reset()` forgets all of it); `reset_stats()` zeroes the counters only.

Importing this package needs neither a GPU nor libcuda: `runtime.py` (cubins into a device's
context, launches) is imported by `dgemm.kernels.loader` with the first kernel it loads.
"""
from . import state, stats
from .cache import Outcome, ensure_compiled, ensure_compiled_outcome, get_entry
from .errors import (CacheDirError, CompileError, CompileLockTimeout, DgemmError, EntryError,
                     KernelNotWarmError, MissingKernelError)

reset_stats = stats.reset

__all__ = ["ensure_compiled", "ensure_compiled_outcome", "Outcome", "get_entry",
           "stats", "reset_stats", "state", "DgemmError", "CompileError", "MissingKernelError",
           "CacheDirError", "CompileLockTimeout", "EntryError", "KernelNotWarmError"]

