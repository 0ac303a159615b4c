"""dgemm's generic JIT: kernel spec -> source -> key -> tiers (memory, disk, remote) -> cubin.

Importing this package needs neither a GPU nor libcuda; `get_kernel` (which loads cubins on a
device) is imported from runtime.py only when first used.
"""
from . import stats
from .cache import ensure_compiled, get_entry
from .errors import (CacheDirError, CompileError, CompileLockTimeout, DgemmError, EntryError,
                     MissingKernelError)

reset_stats = stats.reset

__all__ = ["ensure_compiled", "get_entry", "get_kernel", "stats", "reset_stats", "DgemmError",
           "CompileError", "MissingKernelError", "CacheDirError", "CompileLockTimeout",
           "EntryError"]


def __getattr__(name):
    if name == "get_kernel":
        from .runtime import get_kernel
        return get_kernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
