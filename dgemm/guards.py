"""Tensor guards for the hot path: does a call's every tensor match the tensors of a call that
was validated before, in Python type, dtype, device, shape and strides?

`tensor_guard(*tensors)` records the tensors' metadata; its `check(*others)` is True only when
`others` are as many tensors, each of exactly the recorded Python type, dtype, device (type
and index), sizes and strides, False otherwise (a non-tensor included). It never reads or
keeps data pointers: the caller checks those on every call.

Where this torch has it, the check is torch's own C++ one, `torch._C._dynamo.guards.
TensorGuards`, which torch.compile's guards run: one call for all tensors, ~0.4 us for five on
a CPU host where reading the same attributes in Python costs ~1.5 us. It is private API, so it
is used only if it passes `_self_test` at import (every difference above is caught); else the
same comparison runs in Python. The native check is stricter than needed (it also compares
requires_grad and the dispatch keys, which include the conjugate/negative bits and the thread's
inference-mode state): a stricter check only sends a call down the full, validated path.
"""
from __future__ import annotations

import torch


class PythonGuard:
    """The same comparison in Python: type, shape, strides, dtype and device of each tensor
    (~2.3 us for five on a CPU host: a cached call then costs about what it did before the
    native guard)."""
    __slots__ = ("_expected",)

    def __init__(self, *tensors):
        self._expected = _metadata(tensors)

    def check(self, *tensors) -> bool:
        try:
            return _metadata(tensors) == self._expected
        except (AttributeError, TypeError):       # not a tensor
            return False


def _metadata(tensors: tuple) -> list:
    return [(type(t), t.shape, t.stride(), t.dtype, t.device) for t in tensors]


def _native_guard(*tensors):
    # TensorGuards refuses every call that passes one tensor twice (torch.compile guards
    # aliasing apart), so a call that does (A @ A^T with b[0] = a[0]) gets the Python guard.
    if len(set(map(id, tensors))) < len(tensors):
        return PythonGuard(*tensors)
    # No dynamic dimensions: every size and stride is compared.
    return _TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None)


def _self_test(make) -> bool:
    """True when guards from `make` accept the recorded tensors and refuse each change this
    module promises to catch (the device index cannot be varied on a host without two
    devices; TensorGuards has compared it since it exists)."""
    class Subclass(torch.Tensor):
        pass

    try:
        square = torch.zeros((4, 4))
        other = torch.zeros((2, 8))
        guard = make(square, other)
        changed = (
            (square.view(2, 8), other),                 # shape
            (square.t(), other),                        # strides
            (square, other.view(8, 2).t()),             # strides, same shape
            (square.to(torch.float64), other),          # dtype
            (square, other.to(torch.bfloat16)),
            (square.as_subclass(Subclass), other),      # Python type
            (square.to("meta"), other),                 # device
            (square, None),                             # not a tensor
        )
        return guard.check(square, other) and guard.check(
            torch.ones((4, 4)), torch.ones((2, 8))) and not any(
                guard.check(*tensors) for tensors in changed)
    except Exception:               # an API that changed shape: not usable
        return False


try:
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except ImportError:
    _TensorGuards = None

NATIVE = _TensorGuards is not None and _self_test(_native_guard)
tensor_guard = _native_guard if NATIVE else PythonGuard
