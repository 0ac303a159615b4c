"""(spec, device) -> loaded kernel: the launch path's one lookup, and the load on a miss.

The hot path is a dict lookup keyed on the spec, the device and `env.build_fingerprint()` (the
settings that decide which cubin a spec maps to), so a kernel loaded under one
`DGEMM_JIT_COMPILER` is not served after it changes. On a miss the JIT's cache walk
(`dgemm.jit.cache.get_entry`: memory, disk, remote, compile) hands up a verified entry and the
runtime loads its cubin with the family's launch plan (threads, shared memory, cluster).

Loads are serialised per key, never process-wide: a thread compiling one kernel (or waiting
for another node to) does not hold up a thread loading a different one.
"""
from __future__ import annotations

import threading
from typing import Optional

import torch

from ..jit import cache, env, state
from .spec import KernelSpec

_kernels = state.table("loaded_kernels")           # (spec, device, fingerprint) -> kernel
_key_locks = state.table("loaded_kernels.locks")   # same key -> threading.Lock
_locks_guard = threading.Lock()


def get_kernel(spec: KernelSpec, device_index: Optional[int] = None,
               fingerprint: Optional[tuple] = None):
    """The loaded kernel (`runtime.LoadedKernel`) for `spec` on a device (default: current),
    loaded once per key. `fingerprint`: `env.build_fingerprint()`, if the caller has it."""
    if device_index is None:
        device_index = torch.cuda.current_device()
    key = (spec, device_index, fingerprint or env.build_fingerprint())
    kernel = _kernels.get(key)
    if kernel is not None:
        return kernel
    with _lock_for(key):
        kernel = _kernels.get(key)      # another thread may have loaded it while we waited
        if kernel is None:
            from ..jit import runtime       # the driver, imported with the first load
            entry = cache.get_entry(spec)
            kernel = runtime.load_cubin(entry.cubin, entry.symbol,
                                        num_threads=spec.num_threads,
                                        smem_bytes=spec.smem_bytes,
                                        cluster_dim=spec.cluster_dim,
                                        device_index=device_index)
            _kernels[key] = kernel
        return kernel


def loaded(spec: KernelSpec, device_index: int, fingerprint: tuple):
    """The kernel already loaded for this key, or None: never loads (what a call being
    captured into a CUDA graph may use)."""
    return _kernels.get((spec, device_index, fingerprint))


def _lock_for(key: tuple) -> threading.Lock:
    with _locks_guard:
        lock = _key_locks.get(key)
        if lock is None:
            lock = _key_locks[key] = threading.Lock()
        return lock
