"""Kernel arguments as the driver takes them: a ctypes struct of the values and an array of
pointers into it (`void** kernelParams`). Pure ctypes, no CUDA import, so the kernel families
can describe their signatures on a GPU-free host; `runtime.LoadedKernel.launch` consumes them.
"""
from __future__ import annotations

import ctypes


class TmaDescriptor(ctypes.Structure):
    """The 128 opaque bytes of a CUtensorMap, passed by value as a `__grid_constant__` param."""
    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


class PackedArgs:
    """Kernel parameters ready for the driver: `address` is a `void**` into `values`."""
    __slots__ = ("values", "pointers", "address")

    def __init__(self, values, pointers):
        self.values = values        # keeps the storage alive until the launch returns
        self.pointers = pointers
        self.address = ctypes.addressof(pointers)


class ArgLayout:
    """One kernel signature, as ctypes types in parameter order; built once, packs per call.

    Example: `ArgLayout(ctypes.c_void_p, ctypes.c_uint32).pack(ptr, m)`. TMA descriptors use
    `TmaDescriptor` as the type. The driver copies each parameter from its pointer, so host-side
    alignment of the packed struct does not matter.
    """

    def __init__(self, *types):
        if not types:
            raise ValueError("ArgLayout: a kernel signature needs at least one parameter type")
        fields = [(f"p{i}", t) for i, t in enumerate(types)]
        self._struct = type("KernelParams", (ctypes.Structure,), {"_fields_": fields})
        self._offsets = tuple(getattr(self._struct, name).offset for name, _ in fields)
        self._pointer_array = ctypes.c_void_p * len(types)
        self.types = tuple(types)
        self.num_params = len(types)

    def pack(self, *values) -> PackedArgs:
        if len(values) != self.num_params:
            raise TypeError(f"ArgLayout.pack: expected {self.num_params} kernel arguments; got "
                            f"{len(values)}")
        struct = self._struct(*values)
        base = ctypes.addressof(struct)
        return PackedArgs(struct, self._pointer_array(*[base + o for o in self._offsets]))
