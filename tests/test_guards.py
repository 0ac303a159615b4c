"""dgemm.guards: the tensor guard the hot path trusts instead of validating again. Each
implementation (torch's C++ TensorGuards where it passes the self-test, the Python fallback)
must refuse every change of Python type, dtype, device, shape and strides, and keep no tensor
alive."""
import gc
import weakref

import pytest
import torch

from dgemm import guards

IMPLEMENTATIONS = [pytest.param(guards.PythonGuard, id="python")]
if guards._TensorGuards is not None:
    IMPLEMENTATIONS.append(pytest.param(guards._native_guard, id="native"))


def test_the_native_guard_is_used_on_this_torch():
    # A torch whose TensorGuards fails the self-test still works (the Python guard), ~1 us
    # slower per call: this test says so when it happens.
    assert guards.NATIVE and guards.tensor_guard is guards._native_guard


@pytest.fixture(params=IMPLEMENTATIONS)
def make(request):
    return request.param


def operands():
    a = torch.zeros((64, 512), dtype=torch.float8_e4m3fn)
    sa = torch.ones((4, 64)).t()                   # MN-major scales: strides (1, 64)
    b = torch.zeros((256, 512), dtype=torch.float8_e4m3fn)
    sb = torch.ones((2, 4))
    d = torch.empty((64, 256), dtype=torch.bfloat16)
    return a, sa, b, sb, d


def test_the_same_metadata_passes_whatever_the_data(make):
    a, sa, b, sb, d = operands()
    guard = make(a, sa, b, sb, d)
    assert guard.check(a, sa, b, sb, d)
    assert guard.check(*operands())                # other tensors, other addresses
    storage = torch.zeros(64 * 512 + 16, dtype=torch.float8_e4m3fn)
    assert guard.check(storage[16:].view(64, 512), sa, b, sb, d)   # another storage offset


def changed_calls():
    """(what changed, the call's tensors) with exactly one thing changed."""
    a, sa, b, sb, d = operands()

    class Subclass(torch.Tensor):
        pass

    wide = torch.empty((64, 512), dtype=torch.bfloat16)
    return [
        ("a's shape", (a[:32], sa, b, sb, d)),
        ("a's shape, same numel", (a.view(128, 256), sa, b, sb, d)),
        ("sa's strides (row-major)", (a, sa.contiguous(), b, sb, d)),
        ("d's strides (a strided view)", (a, sa, b, sb, wide[:, :256])),
        ("b's strides (transposed storage)",
         (a, sa, torch.zeros((512, 256), dtype=torch.float8_e4m3fn).t(), sb, d)),
        ("a's dtype", (a.view(torch.int8), sa, b, sb, d)),
        ("sb's dtype", (a, sa, b, sb.double(), d)),
        ("d's dtype", (a, sa, b, sb, d.float())),
        ("sb's Python type", (a, sa, b, sb.as_subclass(Subclass), d)),
        ("sb as a Parameter", (a, sa, b, torch.nn.Parameter(sb, requires_grad=False), d)),
        ("d's device", (a, sa, b, sb, d.to("meta"))),
        ("d is no tensor", (a, sa, b, sb, None)),
        ("b is a list", (a, sa, [b], sb, d)),
    ]


@pytest.mark.parametrize("what", [name for name, _ in changed_calls()])
def test_every_change_is_refused(make, what):
    guard = make(*operands())
    tensors = dict(changed_calls())[what]
    assert not guard.check(*tensors), what


def test_a_guard_of_one_tensor_passed_twice_accepts_such_calls(make):
    a, sa, _, sb, d = operands()
    square = torch.zeros((512, 512), dtype=torch.float8_e4m3fn)
    guard = make(square, sa, square, sb, d)      # A @ A^T
    assert guard.check(square, sa, square, sb, d)
    other = torch.zeros((512, 512), dtype=torch.float8_e4m3fn)
    assert guard.check(other, sa, other, sb, d)
    assert not guard.check(other, sa, other.t(), sb, d)


def test_the_guard_keeps_no_tensor_alive(make):
    tensors = operands()
    refs = [weakref.ref(t) for t in tensors]
    guard = make(*tensors)
    del tensors
    gc.collect()
    assert all(ref() is None for ref in refs)
    assert not guard.check(*operands()[:4], torch.empty(1))


def test_a_guard_that_misses_a_change_fails_the_self_test():
    class IgnoresStrides:
        def __init__(self, *tensors):
            self.shapes = [(type(t), t.shape, t.dtype, t.device) for t in tensors]

        def check(self, *tensors):
            try:
                return [(type(t), t.shape, t.dtype, t.device) for t in tensors] == self.shapes
            except AttributeError:
                return False

    assert guards._self_test(guards.PythonGuard)
    assert not guards._self_test(IgnoresStrides)
    assert not guards._self_test(lambda *tensors: 1 / 0)     # an API that changed shape
