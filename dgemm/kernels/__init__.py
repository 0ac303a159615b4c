"""Kernel families: one Python module and one CUDA header each.

A family module owns everything Python knows about its kernel and exposes:

    NAME, HEADER                 spec.kernel value; the header under csrc/ (one __global__)
    select(gemm_type, m, n, k, num_groups, num_sms, arch) -> KernelSpec
    cpp_instance(spec)           the template-id the generated source instantiates
    plan_checks(spec)            C++ that fails the compile if Python's plan (shared memory,
                                 threads, ...) differs from the header's
    num_threads(spec), smem_bytes(spec)
    ARGS                         the kernel's run-time signature (dgemm.jit.args.ArgLayout)
    launch_args(spec, a, sa, b, sb, d, layout) -> (grid, values in ARGS order); the values may
                                 depend on the tensors only through their data pointers (as
                                 c_void_p values, or TMA maps whose `address` is one) and the
                                 geometry `plans` keys on, so a launch plan built once per
                                 geometry is re-pointed per call (dgemm/kernels/plans.py)
    launch(spec, a, sa, b, sb, d, layout, kernel=None, stream=None)
                                 (the weight-gradient families, recipe (1, 1, 128):
                                 launch(spec, a, sa, b, sb, c, d, kernel=None) and
                                 launch_k_grouped(spec, a, sa, b, sb, c, d, ks, kernel=None))

A spec names its family (`spec.kernel`), so whoever holds a spec finds its launcher with
`family(spec.kernel)`. Adding a family: a module here, an entry in FAMILIES, a header in
csrc/dgemm/.
"""
from __future__ import annotations

import importlib
import sys

from .spec import KernelSpec

# spec.kernel -> module of this package.
FAMILIES = {
    "fp8_gemm": "hopper_fp8",
    "fp8_gemm_portable": "portable_fp8",
    "fp8_wgrad": "hopper_wgrad",                 # recipe (1, 1, 128): weight gradients
    "fp8_wgrad_portable": "portable_wgrad",
}


def family(name: str):
    """The module of family `name` (imported on first use)."""
    module = FAMILIES.get(name)
    if module is None:
        raise ValueError(f"unknown kernel family {name!r}; expected one of "
                         f"{', '.join(FAMILIES)}")
    qualified = f"{__name__}.{module}"
    return sys.modules.get(qualified) or importlib.import_module(qualified)


__all__ = ["FAMILIES", "KernelSpec", "family"]
