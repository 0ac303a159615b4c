"""Launch plans: a GEMM call's kernel parameters built once per kernel and call geometry, then
reused by every call of that geometry with only the tensors' addresses patched in.

Generic over the families: a family declares its kernel signature (`ARGS`) and
`launch_args(spec, a, sa, b, sb, d, layout) -> (grid, values)`; the first call of a geometry
builds the values, and each parameter is classified by its value:

- a `c_void_p` equal to exactly one of the call's six data pointers (a, sa, b, sb, d, layout;
  0 for no layout) follows that tensor;
- a `TmaDescriptor` whose `address` (set where it was encoded) equals exactly one of them is
  copied into the plan and re-pointed per call with `cuTensorMapReplaceAddress`;
- any other parameter (M, ...) is fixed by the geometry.

So a family's values may depend on the tensors only through their data pointers and through
what the plan key holds: the loaded kernel (spec, device, build), the shapes of a, sa, b and d,
sa's strides and whether its address is 16-byte aligned, whether there is a layout tensor. A
call whose pointers are ambiguous (two
tensors at one address) or a value no rule covers is launched from freshly packed arguments
instead, every time (correct, only slower). Plans are per thread: patching and launching are
two steps, and another thread's patch in between would launch with its pointers.
"""
from __future__ import annotations

import ctypes
import threading

from ..jit import state
from ..jit import launcher
from ..jit.args import TmaDescriptor

_plans = state.table("kernels.launch_plans")
_MAX_PLANS = 4096
_get_ident = threading.get_ident
_POINTER = ctypes.c_void_p


def plan_key(kernel, a, sa, b, d, layout) -> tuple:
    """Everything but the pointers that a family's launch values may depend on, including
    whether sa starts 16-byte aligned (TMA can map it only then)."""
    # Plain tuples, not torch.Size: those stay tracked by the garbage collector (bench/NOTES.md,
    # "w2"), and a warm-up keeps thousands of these keys.
    return (kernel, tuple(a.shape), tuple(sa.shape), sa.stride(), sa.data_ptr() % 16 == 0,
            tuple(b.shape), tuple(d.shape), layout is None, _get_ident())


def pointers_of(a, sa, b, sb, d, layout) -> tuple:
    return (a.data_ptr(), sa.data_ptr(), b.data_ptr(), sb.data_ptr(), d.data_ptr(),
            0 if layout is None else layout.data_ptr())


def launch(family, spec, kernel, a, sa, b, sb, d, layout, stream: int):
    """Run one validated call of `spec` with the loaded `kernel` on `stream`; returns the plan
    it used, or None (launched from packed arguments)."""
    pointers = pointers_of(a, sa, b, sb, d, layout)
    key = plan_key(kernel, a, sa, b, d, layout)
    plan = _plans.get(key)
    if plan is None:
        grid, values = family.launch_args(spec, a, sa, b, sb, d, layout)
        plan = build(family.ARGS.types, kernel, grid, values, pointers)
        if plan is None:
            launch_unplanned(family, kernel, grid, values, stream)
            return None
        if len(_plans) >= _MAX_PLANS:     # e.g. a warm-up over every M of a range
            _plans.clear()
        _plans[key] = plan
    plan.run(pointers, stream)
    return plan


def launch_unplanned(family, kernel, grid, values, stream: int) -> None:
    args = family.ARGS.pack(*values)
    launcher.launch_packed(kernel.handle, grid, kernel.num_threads, kernel.smem_bytes,
                           kernel.cluster_config, args.address, stream, kernel.symbol)


def _source(value: int, pointers: tuple):
    """The index of the one tensor at `value`, or None (none, or several: aliasing)."""
    found = None
    for index, pointer in enumerate(pointers):
        if pointer == value:
            if found is not None:
                return None
            found = index
    return found


def build(types: tuple, kernel, grid, values, pointers: tuple):
    """A `launcher.LaunchPlan` for these values, or None if some value cannot be classified."""
    if len(values) != len(types):
        raise TypeError(f"launch plan: {kernel.symbol} takes {len(types)} parameters; the "
                        f"family built {len(values)}")
    params, patches = [], []
    for ctype, value in zip(types, values):
        if ctype is TmaDescriptor or ctype is _POINTER:
            pointer = getattr(value, "address", None) if ctype is TmaDescriptor else value
            source = _source(pointer, pointers)
            if source is None:
                return None
            kind = launcher.DESCRIPTOR if ctype is TmaDescriptor else launcher.POINTER
            patches.append((source, kind, len(params)))
        params.append((ctype, value))
    return launcher.LaunchPlan(kernel.handle, grid, kernel.num_threads, kernel.smem_bytes,
                               kernel.cluster_dim, params, patches, pointers, kernel.symbol)
