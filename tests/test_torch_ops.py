"""The GEMMs as torch.library custom operators, on a host without a GPU: fake CUDA tensors
(FakeTensorMode) get correctly shaped outputs without a device, torch.compile(fullgraph=True)
records one dgemm operator per call and no graph break, the in-place operators declare that
they write `d` (so functionalization handles them), validation raises the same exceptions
under FakeTensorMode, and plain eager calls skip the dispatcher only when nothing could
observe them."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.backends.common import aot_autograd
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import dgemm
from dgemm import gemm, ops
from compile_helpers import GraphRecorder  # tests/compile_helpers.py

FP8 = torch.float8_e4m3fn
BF16 = torch.bfloat16

pytestmark = pytest.mark.usefixtures("fresh_dynamo", "hot_path")


@pytest.fixture(params=["c", "python"])
def hot_path(request, monkeypatch):
    """Each test runs with cached calls bound to the C hot path (as after any memoised call
    in a process) and to the Python one: the tracer must meet neither."""
    from dgemm import gemm, native
    hot = native.hot_path() if request.param == "c" else gemm._cached
    assert hot is not None, native.status()
    monkeypatch.setattr(gemm, "_hot", hot)
    monkeypatch.setattr(gemm, "_hot_bound", True)


def _empty(shape, dtype=torch.float32, device="cuda"):
    return torch.empty(shape, dtype=dtype, device=device)


def dense(m=64, n=384, k=256, device="cuda"):
    a = (_empty((m, k), FP8, device), _empty((m, k // 128), device=device))
    b = (_empty((n, k), FP8, device), _empty(((n + 127) // 128, k // 128), device=device))
    return a, b, _empty((m, n), BF16, device)


def contiguous(m=256, n=384, k=256, groups=3):
    a = (_empty((m, k), FP8), _empty((m, k // 128)))
    b = (_empty((groups, n, k), FP8), _empty((groups, (n + 127) // 128, k // 128)))
    return a, b, _empty((m, n), BF16), _empty((m,), torch.int32)


def masked(groups=2, max_m=64, n=384, k=256):
    a = (_empty((groups, max_m, k), FP8), _empty((groups, max_m, k // 128)))
    b = (_empty((groups, n, k), FP8), _empty((groups, (n + 127) // 128, k // 128)))
    return a, b, _empty((groups, max_m, n), BF16), _empty((groups,), torch.int32)


# One function per GEMM form, and the arguments it takes (built under a FakeTensorMode).
CALLS = {
    "fp8_gemm_nt": (lambda a, b, d: dgemm.fp8_gemm_nt(a, b, d), dense),
    "fp8_gemm_nt(d=None)": (lambda a, b, d: dgemm.fp8_gemm_nt(a, b), dense),
    "m_grouped_fp8_gemm_nt_contiguous": (
        lambda a, b, d, layout: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout),
        contiguous),
    "m_grouped_fp8_gemm_nt_masked": (
        lambda a, b, d, layout: dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, layout, 32), masked),
}
OPERATOR = {"fp8_gemm_nt": ops.FP8_GEMM_NT, "fp8_gemm_nt(d=None)": ops.FP8_GEMM_NT_ALLOC,
            "m_grouped_fp8_gemm_nt_contiguous": ops.M_GROUPED_CONTIGUOUS,
            "m_grouped_fp8_gemm_nt_masked": ops.M_GROUPED_MASKED}


# --- schemas --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous",
                                  "m_grouped_fp8_gemm_nt_masked"])
def test_the_in_place_operators_declare_that_they_write_d_and_return_nothing(name):
    schema = getattr(torch.ops.dgemm, name).default._schema
    written = [arg.name for arg in schema.arguments
               if arg.alias_info is not None and arg.alias_info.is_write]
    assert written == ["d"]
    assert len(schema.returns) == 0


def test_the_allocating_operator_writes_no_input_and_returns_one_tensor():
    schema = torch.ops.dgemm.fp8_gemm_nt_alloc.default._schema
    assert all(arg.alias_info is None for arg in schema.arguments)
    assert [r.type.kind() for r in schema.returns] == ["TensorType"]


def test_importing_dgemm_ops_registers_every_operator_in_the_dgemm_namespace():
    for name in ("fp8_gemm_nt", "fp8_gemm_nt_alloc", "m_grouped_fp8_gemm_nt_contiguous",
                 "m_grouped_fp8_gemm_nt_masked"):
        assert getattr(torch.ops.dgemm, name).default.namespace == "dgemm"


# --- FakeTensorMode -------------------------------------------------------------------------------
def test_fp8_gemm_nt_with_d_none_returns_a_bf16_m_by_n_cuda_tensor_under_fake_mode(fake_cuda):
    a, b, _ = dense(m=64, n=384)
    out = dgemm.fp8_gemm_nt(a, b)
    assert (tuple(out.shape), out.dtype, out.device.type) == ((64, 384), BF16, "cuda")
    assert not torch.cuda.is_initialized()


@pytest.mark.parametrize("name", list(CALLS))
def test_every_gemm_returns_its_output_shape_under_fake_mode_without_a_device(name, fake_cuda):
    fn, make = CALLS[name]
    args = make()
    out = fn(*args)
    expected = args[2]
    assert tuple(out.shape) == tuple(expected.shape) and out.dtype == BF16
    if name != "fp8_gemm_nt(d=None)":
        assert out is expected          # the in-place forms return the d they were given
    assert not torch.cuda.is_initialized()


def test_a_wrong_scale_shape_raises_the_same_value_error_under_fake_mode(fake_cuda):
    a, b, d = dense(m=64, k=256)
    with pytest.raises(ValueError, match=r"a\[1\] \(scales\) must have shape \(m, k / 128\) = "
                                         r"\(64, 2\); got \(32, 2\)"):
        dgemm.fp8_gemm_nt((a[0], _empty((32, 2))), b, d)


def test_a_bf16_lhs_raises_the_same_type_error_under_fake_mode(fake_cuda):
    a, b, d = dense()
    with pytest.raises(TypeError, match=r"a\[0\] must be float8_e4m3fn.*per_token_cast_to_fp8"):
        dgemm.fp8_gemm_nt((_empty(a[0].shape, BF16), a[1]), b, d)


def test_cpu_and_cuda_tensors_mixed_raise_runtime_error_under_fake_mode(fake_cuda):
    a, b, d = dense()
    with pytest.raises(RuntimeError, match=r"every tensor must be on cuda:0; d is on cpu"):
        dgemm.fp8_gemm_nt(a, b, _empty(d.shape, BF16, "cpu"))


def test_an_unaligned_fake_view_raises_value_error_about_alignment(fake_cuda):
    a, b, d = dense(m=64, k=256)
    storage = _empty((64 * 256 + 8,), FP8)
    lhs = storage.as_strided((64, 256), (256, 1), 8)
    with pytest.raises(ValueError, match=r"16-byte aligned"):
        dgemm.fp8_gemm_nt((lhs, a[1]), b, d)


def test_grouped_validation_raises_under_fake_mode(fake_cuda):
    a, b, d, layout = contiguous(m=256)
    with pytest.raises(TypeError, match=r"m_indices must be int32"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, _empty((256,), torch.int64))
    a, b, d, masked_m = masked()
    with pytest.raises(ValueError, match=r"expected_m must be a positive int"):
        dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 0)


def test_calling_an_operator_on_cpu_tensors_raises_the_device_error():
    a, b, d = dense(device="cpu")
    with pytest.raises(RuntimeError, match=r"fp8_gemm_nt: tensors must be on a CUDA device"):
        torch.ops.dgemm.fp8_gemm_nt(a[0], a[1], b[0], b[1], d)


# --- torch.compile --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CALLS))
def test_compile_fullgraph_records_one_dgemm_operator_and_no_graph_break(name, fake_cuda):
    fn, make = CALLS[name]
    args = make()
    recorder = GraphRecorder()
    out = torch.compile(fn, backend=recorder, fullgraph=True)(*args)
    assert tuple(out.shape) == tuple(args[2].shape)
    assert len(recorder.graphs) == 1
    assert recorder.targets() == [OPERATOR[name]]


@pytest.mark.parametrize("name", list(CALLS))
def test_dynamo_explain_counts_no_graph_break(name, fake_cuda):
    fn, make = CALLS[name]
    explanation = torch._dynamo.explain(fn)(*make())
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


@pytest.mark.parametrize("name", ["fp8_gemm_nt", "fp8_gemm_nt(d=None)"])
def test_compile_with_dynamic_m_serves_a_new_m_without_another_graph(name, fake_cuda):
    fn, _ = CALLS[name]
    recorder = GraphRecorder()
    compiled = torch.compile(fn, backend=recorder, fullgraph=True, dynamic=True)
    compiled(*dense(m=64))
    out = compiled(*dense(m=100))
    assert tuple(out.shape) == (100, 384)
    assert len(recorder.graphs) == 1


def test_a_validation_error_while_compiling_without_fullgraph_is_the_eager_exception(fake_cuda):
    a, b, d = dense(m=64, k=256)
    compiled = torch.compile(lambda a, b, d: dgemm.fp8_gemm_nt(a, b, d), backend="eager")
    with pytest.raises(ValueError, match=r"a\[1\] \(scales\) must have shape"):
        compiled((a[0], _empty((32, 2))), b, d)


def test_a_validation_error_under_fullgraph_carries_dgemms_message(fake_cuda):
    """fullgraph=True forbids falling back to eager, so Dynamo reports the exception the
    traced code raised as Unsupported; its text still holds dgemm's message."""
    a, b, d = dense(m=64, k=256)
    compiled = torch.compile(lambda a, b, d: dgemm.fp8_gemm_nt(a, b, d), backend="eager",
                             fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported,
                       match=r"a\[1\] \(scales\) must have shape"):
        compiled((a[0], _empty((32, 2))), b, d)


def test_functionalization_turns_the_in_place_operator_into_a_functional_one():
    """AOT autograd (torch.compile's stage before Inductor) must see the write to `d`: the
    forward graph holds auto_functionalized and returns the new value of d as a mutated
    input. (CPU fake tensors: AOT cannot trace fake CUDA tensors on a CPU-only build of
    torch; the operator is called directly because the public function wants CUDA.)"""
    forward_graphs = []

    def keep(gm, example_inputs):
        forward_graphs.append(gm)
        return gm

    def fn(a, sa, b, sb, d):
        torch.ops.dgemm.fp8_gemm_nt(a, sa, b, sb, d)
        return d

    with FakeTensorMode(allow_non_fake_inputs=True):
        a, b, d = dense(device="cpu")
        torch.compile(fn, backend=aot_autograd(fw_compiler=keep), fullgraph=True)(
            a[0], a[1], b[0], b[1], d)
    code = forward_graphs[0].code
    assert "auto_functionalized" in code and "dgemm.fp8_gemm_nt.default" in code


# --- eager: directly or through the dispatcher ----------------------------------------------------
class RecordingMode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append(func)
        return func(*args, **(kwargs or {}))


def test_a_dispatch_mode_sees_the_operator(fake_cuda):
    a, b, d = dense()
    with RecordingMode() as recording:
        dgemm.fp8_gemm_nt(a, b, d)
    assert ops.FP8_GEMM_NT in recording.calls


def test_plain_tensors_and_parameters_outside_any_mode_go_directly():
    t = torch.empty(4)
    weight = torch.nn.Parameter(torch.empty(4), requires_grad=False)
    assert gemm._direct(t, t, weight, t, None)
    assert gemm._direct(t, t, weight, t, t, t)


def test_fake_tensors_go_through_the_dispatcher_even_outside_their_mode():
    with FakeTensorMode():
        fake = torch.empty(4)
    t = torch.empty(4)
    assert not gemm._direct(t, t, t, t, fake)
    assert not gemm._direct(t, t, t, t, t, fake)


def test_a_dispatch_mode_or_a_torch_function_mode_sends_calls_through_the_dispatcher():
    t = torch.empty(4)
    with RecordingMode():
        assert not gemm._direct(t, t, t, t, None)
    with TorchFunctionMode():
        assert not gemm._direct(t, t, t, t, None)
    assert gemm._direct(t, t, t, t, None)
