"""The per-call launch, straight into libcuda through ctypes: launch plans built once per kernel
and call geometry, patched with the call's pointers, launched with one foreign call.

cuda-python's `cuLaunchKernel` re-packs its arguments on every call (and `cuLaunchKernelEx`
builds a config object per call); here everything but the pointers is built once:

- `LaunchPlan` holds a kernel's launch config (a `CUlaunchConfig`: grid, block, shared
  memory, the cluster attribute if any), the `void**` array and every parameter's bytes in one
  bytearray. `run(pointers, stream)` rewrites only the parameters whose tensor moved (plain
  pointers: their 8 bytes; TMA descriptors: `cuTensorMapReplaceAddress`, the driver's
  documented way to re-point an encoded descriptor, on the plan's own copy), sets the stream
  and calls cuLaunchKernelEx.
- `launch_packed` launches `ArgLayout.pack`ed arguments the same way (calls without a plan).

Pure ctypes: libcuda is opened on the first launch, so the families can build plans on a
GPU-free host (tests swap `driver()` for a recording stand-in). Every CUresult is checked.
"""
from __future__ import annotations

import contextlib
import ctypes
import struct
import threading
from typing import Optional, Sequence, Tuple

from .args import TmaDescriptor

_CLUSTER_DIMENSION = 4          # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (cuda.h)


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte value union (cuda.h)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("cluster_x", ctypes.c_uint), ("cluster_y", ctypes.c_uint),
                ("cluster_z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h)."""
    _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint), ("grid_z", ctypes.c_uint),
                ("block_x", ctypes.c_uint), ("block_y", ctypes.c_uint),
                ("block_z", ctypes.c_uint), ("shared_mem_bytes", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)),
                ("num_attrs", ctypes.c_uint)]


class Driver:
    """The libcuda entry points of the launch path (launch, TMA encoding and re-pointing,
    contexts), with their C signatures."""

    def __init__(self, library: Optional[ctypes.CDLL] = None):
        lib = library or ctypes.CDLL("libcuda.so.1")
        u = ctypes.c_uint
        self.cuLaunchKernel = lib.cuLaunchKernel
        self.cuLaunchKernel.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_void_p]
        self.cuLaunchKernel.restype = ctypes.c_int
        self.cuLaunchKernelEx = lib.cuLaunchKernelEx
        self.cuLaunchKernelEx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                          ctypes.c_void_p]
        self.cuLaunchKernelEx.restype = ctypes.c_int
        # TMA encoding (`runtime.make_tma_desc`) straight into a descriptor's storage:
        # cuda-python's wrapper builds an object per dimension and a map to copy out of, on
        # every first call of a geometry (a warm-up sweeps thousands of them).
        u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
        self.cuTensorMapEncodeTiled = lib.cuTensorMapEncodeTiled
        self.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                                                ctypes.c_void_p, u64p, u64p, u32p, u32p,
                                                ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                                ctypes.c_int]
        self.cuTensorMapEncodeTiled.restype = ctypes.c_int
        self.cuTensorMapReplaceAddress = lib.cuTensorMapReplaceAddress
        self.cuTensorMapReplaceAddress.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.cuTensorMapReplaceAddress.restype = ctypes.c_int
        # Contexts (`on_device`): the launch and TMA encoding use the calling thread's.
        out = ctypes.POINTER(ctypes.c_void_p)
        for name, symbol, args in (
                ("cuCtxGetCurrent", "cuCtxGetCurrent", [out]),
                ("cuCtxSetCurrent", "cuCtxSetCurrent", [ctypes.c_void_p]),
                ("cuCtxPushCurrent", "cuCtxPushCurrent_v2", [ctypes.c_void_p]),
                ("cuCtxPopCurrent", "cuCtxPopCurrent_v2", [out]),
                ("cuDeviceGet", "cuDeviceGet", [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
                ("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", [out, ctypes.c_int])):
            fn = getattr(lib, symbol)
            fn.argtypes, fn.restype = args, ctypes.c_int
            setattr(self, name, fn)


_driver: Optional[Driver] = None
_driver_lock = threading.Lock()


def driver() -> Driver:
    global _driver
    if _driver is None:
        with _driver_lock:
            if _driver is None:
                _driver = Driver()
    return _driver


def set_driver(stand_in) -> None:
    """Replace libcuda's entry points (tests: a recorder on a GPU-free host); None: the real
    library again on next use."""
    global _driver
    _driver = stand_in


def _fail(call: str, err: int, what: str) -> None:
    if err == _STAND_IN_RAISED and _stand_in_errors:
        raise _stand_in_errors.pop()
    from .runtime import error_text          # cuda-python's names, only on the error path
    raise RuntimeError(f"{call} failed for {what}: {error_text(err)}")


_primary_contexts: dict = {}


def _primary_context(lib, index: int) -> int:
    context = _primary_contexts.get(index)
    if context is None:
        device, handle = ctypes.c_int(), ctypes.c_void_p()
        for call, err in (("cuDeviceGet", lib.cuDeviceGet(ctypes.byref(device), index)),
                          ("cuDevicePrimaryCtxRetain",
                           lib.cuDevicePrimaryCtxRetain(ctypes.byref(handle), device))):
            if err:
                _fail(call, err, f"cuda:{index}")
        context = _primary_contexts[index] = handle.value
    return context


@contextlib.contextmanager
def on_device(index: int):
    """Device `index`'s primary context (torch's) current in the calling thread for the block:
    driver calls (TMA encoding, module loads, launches) use the thread's context, which a
    thread that never ran a CUDA runtime call does not have, and which is another device's
    when torch's current device is not the tensors'. A thread without one is left bound to
    it, as the runtime's first call would; any other is restored after the block. No-op for
    stand-in drivers without context calls (tests on a GPU-free host)."""
    lib = _driver or driver()
    if not hasattr(lib, "cuCtxGetCurrent"):
        yield
        return
    primary = _primary_context(lib, index)
    current = ctypes.c_void_p()
    err = lib.cuCtxGetCurrent(ctypes.byref(current))
    if err:
        _fail("cuCtxGetCurrent", err, f"cuda:{index}")
    if current.value == primary:
        yield
        return
    if current.value is None:
        err = lib.cuCtxSetCurrent(primary)
        if err:
            _fail("cuCtxSetCurrent", err, f"cuda:{index}")
        yield
        return
    err = lib.cuCtxPushCurrent(primary)
    if err:
        _fail("cuCtxPushCurrent", err, f"cuda:{index}")
    try:
        yield
    finally:
        lib.cuCtxPopCurrent(ctypes.byref(ctypes.c_void_p()))


def aligned_descriptor() -> TmaDescriptor:
    """A zeroed `TmaDescriptor` at a 64-byte aligned address (CUtensorMap's alignment)."""
    storage = (ctypes.c_uint8 * (ctypes.sizeof(TmaDescriptor) + 64))()
    return TmaDescriptor.from_buffer(storage, (-ctypes.addressof(storage)) % 64)


# Where a parameter's value comes from: a tensor's data pointer (its index among the call's
# tensors) as a plain pointer or as a TMA descriptor's global address, or fixed by the plan.
POINTER, DESCRIPTOR = "pointer", "descriptor"


class LaunchPlan:
    """One kernel's launch for one call geometry. `params`: per kernel parameter, (its ctypes
    type, its value: an int, or a `TmaDescriptor`); `patches`: (tensor index, kind, parameter
    index) for the ones that follow a tensor. Every launch is one cuLaunchKernelEx of a config
    built here (grid, block, shared memory, the cluster attribute if any): per call only its
    stream is written, and four arguments cross into C instead of cuLaunchKernel's eleven.

    The config, its attribute, the `void**` array and every parameter live in one bytearray
    (descriptors 64-byte aligned): a bytearray is not tracked by Python's garbage collector,
    while a plan of ctypes objects held ~40 tracked objects, and a warm-up that builds a plan
    for each of thousands of new M paid for every one of them in each full collection
    (bench/NOTES.md, "w2"). `patches` hold (tensor index, kind, byte offset) then."""
    __slots__ = ("function", "grid", "cluster_dim", "storage", "shift", "base",
                 "config_address", "address", "patches", "pointers", "what", "native")

    def __init__(self, function: int, grid: Tuple[int, int, int], num_threads: int,
                 smem_bytes: int, cluster_dim: int, params: Sequence, patches: Sequence,
                 pointers: tuple, what: str):
        self.function = function
        self.grid = tuple(int(g) for g in grid)
        self.cluster_dim = cluster_dim
        self.what = what
        # Layout: config | attribute | void* per parameter | parameters (each at its own
        # alignment; descriptors at 64 bytes, CUtensorMap's).
        offset = _CONFIG_BYTES + _ATTRIBUTE_BYTES
        array_offset = offset
        offset += 8 * len(params)
        param_offsets = []
        for ctype, _ in params:
            align = 64 if ctype is TmaDescriptor else ctypes.alignment(ctype)
            offset = -(-offset // align) * align
            param_offsets.append(offset)
            offset += ctypes.sizeof(ctype)
        self.storage = storage = bytearray(offset + 64)
        # A bytearray's buffer stays where it is unless resized, which a plan never does (the
        # ctypes view that reads its address is dropped at once).
        address = ctypes.addressof(ctypes.c_char.from_buffer(storage))
        self.shift = shift = (-address) % 64
        self.base = base = address + shift
        self.config_address = base
        self.address = base + array_offset
        attribute = LaunchAttribute(id=_CLUSTER_DIMENSION, cluster_x=cluster_dim, cluster_y=1,
                                    cluster_z=1)
        config = LaunchConfig(*self.grid, num_threads, 1, 1, smem_bytes, None, None,
                              1 if cluster_dim > 1 else 0)
        config.attrs = ctypes.cast(base + _CONFIG_BYTES, ctypes.POINTER(LaunchAttribute))
        self._write(0, bytes(config))
        self._write(_CONFIG_BYTES, bytes(attribute))
        for index, ((ctype, value), at) in enumerate(zip(params, param_offsets)):
            _pack_pointer(storage, shift + array_offset + 8 * index, base + at)
            self._write(at, bytes(value) if ctype is TmaDescriptor else bytes(ctype(value)))
        self.patches = tuple((source, kind, param_offsets[index])
                             for source, kind, index in patches)
        self.pointers = tuple(pointers)        # what the parameters hold now
        # What the C hot path reads: addresses of the config and the void** array, the
        # kernel, the parameters' base and the patches (absolute offsets from it).
        self.native = (self.config_address, self.function, self.address, self.base,
                       self.patches)

    def _write(self, offset: int, data: bytes) -> None:
        start = self.shift + offset
        self.storage[start:start + len(data)] = data

    def bind_stream(self, stream: int) -> None:
        """Write the stream the next launch goes to into the config."""
        _pack_pointer(self.storage, self.shift + _STREAM_OFFSET, stream)

    def run(self, pointers: tuple, stream: int) -> None:
        """Launch on `stream` with the tensors at `pointers` (same order as at build). The C
        hot path (dgemm/native/hot_path.c) does the same from `native`."""
        lib = _driver or driver()
        if pointers != self.pointers:
            self._patch(lib, pointers)
        _pack_pointer(self.storage, self.shift + _STREAM_OFFSET, stream)   # bind_stream, inlined
        err = lib.cuLaunchKernelEx(self.config_address, self.function, self.address, None)
        if err:
            self._launch_failed(err)

    def _patch(self, lib, pointers: tuple) -> None:
        # Only the parameters of tensors that moved (typically d or A alone: one TMA map
        # re-pointed, not four). Mark the plan as holding nothing valid until they are
        # rewritten: a failure half way must not leave a plan that a later call with these
        # pointers would trust, and the next call then rewrites every parameter.
        held, self.pointers = self.pointers, None
        for index, kind, offset in self.patches:
            if held is not None and held[index] == pointers[index]:
                continue
            if kind is POINTER:
                _pack_pointer(self.storage, self.shift + offset, pointers[index])
            else:
                err = lib.cuTensorMapReplaceAddress(self.base + offset, pointers[index])
                if err:
                    self._replace_failed(err, pointers[index])
        self.pointers = pointers

    def _launch_failed(self, err: int) -> None:
        _fail("cuLaunchKernelEx", err, f"{self.what} with grid {self.grid}, cluster "
                                       f"{self.cluster_dim}")

    def _replace_failed(self, err: int, pointer: int) -> None:
        _fail("cuTensorMapReplaceAddress", err, f"{self.what} (address {pointer:#x})")


_CONFIG_BYTES = -(-ctypes.sizeof(LaunchConfig) // 64) * 64
_ATTRIBUTE_BYTES = -(-ctypes.sizeof(LaunchAttribute) // 64) * 64
_STREAM_OFFSET = LaunchConfig.stream.offset
_LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p)
_REPLACE_ADDRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


_STAND_IN_RAISED = 999          # no CUresult: a stand-in's callback raised (`_stand_in_errors`)
_stand_in_errors: list = []


def _reporting(fn):
    """A stand-in's entry point for a ctypes callback, which cannot raise: an exception is
    kept for `_fail` to raise in the caller's frame, and a failure code returned."""
    def call(*args):
        try:
            return fn(*args)
        except BaseException as exc:         # noqa: B902 - re-raised by _fail
            _stand_in_errors.append(exc)
            return _STAND_IN_RAISED
    return call


def entry_points(lib) -> tuple:
    """(cuLaunchKernelEx, cuTensorMapReplaceAddress, what keeps them valid) of a driver, the
    first two as C function addresses for the C hot path: libcuda's own symbols, or for a
    stand-in whose entry points are Python callables, ctypes callbacks into them."""
    functions = []
    for name, prototype in (("cuLaunchKernelEx", _LAUNCH_EX),
                            ("cuTensorMapReplaceAddress", _REPLACE_ADDRESS)):
        fn = getattr(lib, name)
        if not isinstance(fn, ctypes._CFuncPtr):
            fn = prototype(_reporting(fn))
        functions.append(fn)
    addresses = [ctypes.cast(fn, ctypes.c_void_p).value for fn in functions]
    return addresses[0], addresses[1], tuple(functions)


_pack_pointer = struct.Struct("<Q").pack_into       # (buffer, offset, value)


def launch_packed(function: int, grid: Tuple[int, int, int], num_threads: int, smem_bytes: int,
                  config: Optional[LaunchConfig], params_address: int, stream: int,
                  what: str) -> None:
    """One launch of already packed parameters (`ArgLayout.pack(...).address`). `config`: the
    kernel's cluster launch config (a template: this call launches a copy with its own grid
    and stream), or None."""
    lib = _driver or driver()
    if config is None:
        err = lib.cuLaunchKernel(function, grid[0], grid[1], grid[2], num_threads, 1, 1,
                                 smem_bytes, stream, params_address, None)
        if err:
            _fail("cuLaunchKernel", err, f"{what} with grid {tuple(grid)}")
        return
    # A copy per call: the template belongs to the loaded kernel, which every thread shares,
    # and the foreign call releases the GIL, so another thread's grid or stream written into
    # a shared config could be what the driver reads for this launch. (The copy's attribute
    # pointer is the template's, kept alive by the kernel.)
    call = LaunchConfig.from_buffer_copy(config)
    call.grid_x, call.grid_y, call.grid_z = grid
    call.stream = stream
    err = lib.cuLaunchKernelEx(ctypes.addressof(call), function, params_address, None)
    if err:
        _fail("cuLaunchKernelEx", err, f"{what} with grid {tuple(grid)}")


def cluster_config(num_threads: int, smem_bytes: int, cluster_dim: int) -> LaunchConfig:
    """A `LaunchConfig` with a cluster attribute of `cluster_dim` CTAs (kept alive by it): the
    template `launch_packed` copies per call."""
    attrs = LaunchAttribute(id=_CLUSTER_DIMENSION, cluster_x=cluster_dim, cluster_y=1,
                            cluster_z=1)
    config = LaunchConfig(0, 0, 0, num_threads, 1, 1, smem_bytes, None,
                          ctypes.pointer(attrs), 1)
    config._attrs = attrs          # noqa: SLF001  keeps the attribute storage alive
    return config
