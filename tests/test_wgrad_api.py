"""The weight-gradient GEMMs' API on a host without a GPU: `fp8_gemm_nt(..., c=c,
recipe=(1, 1, 128))` and `k_grouped_fp8_gemm_nt_contiguous` validate every input with a clear
exception naming the fix, recipe None keeps today's forward GEMM, the calls run as one
`dgemm::` operator under FakeTensorMode and torch.compile(fullgraph=True), and `d is c` takes
the in-place (`_accumulate`) operator so no operator sees one tensor as input and output."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.backends.common import aot_autograd
from torch._subclasses.fake_tensor import FakeTensorMode

import dgemm
from dgemm import gemm, ops, wgrad
from compile_helpers import GraphRecorder  # tests/compile_helpers.py

FP8 = torch.float8_e4m3fn
F32 = torch.float32
WGRAD = (1, 1, 128)

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _empty(shape, dtype=F32, device="cuda"):
    return torch.empty(shape, dtype=dtype, device=device)


def dense(m=256, n=384, k=512, device="cuda"):
    a = (_empty((m, k), FP8, device), _empty((m, k // 128), device=device))
    b = (_empty((n, k), FP8, device), _empty((n, k // 128), device=device))
    return a, b, _empty((m, n), device=device), _empty((m, n), device=device)


def k_grouped(ks=(128, 0, 384), m=256, n=384, device="cuda"):
    total = sum(ks)
    a = (_empty((total * m,), FP8, device), _empty((m, total // 128), device=device))
    b = (_empty((total * n,), FP8, device), _empty((n, total // 128), device=device))
    groups = len(ks)
    return (a, b, _empty((groups, m, n), device=device), list(ks),
            _empty((groups,), torch.int32, device), _empty((groups, m, n), device=device))


# --- recipes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("recipe", [None, (1, 128, 128), [1, 128, 128]])
def test_recipe_none_or_1_128_128_is_the_forward_gemm(recipe):
    assert wgrad.check_recipe("f", recipe) is None


def test_recipe_1_1_128_is_the_weight_gradient():
    assert wgrad.check_recipe("f", (1, 1, 128)) == WGRAD


@pytest.mark.parametrize("recipe, error, match", [
    ((1, 128), TypeError, "tuple of three ints"), ("1,1,128", TypeError, "tuple of three ints"),
    ((1, 1, 128.0), TypeError, "tuple of three ints"), ((1, 1, True), TypeError, "three ints"),
    ((1, 1, 64), ValueError, r"recipe \(1, 1, 64\) is not supported; use None or"),
    ((128, 1, 128), ValueError, "not supported")])
def test_a_bad_recipe_names_the_supported_ones(recipe, error, match, fake_cuda):
    a, b, d, c = dense()
    with pytest.raises(error, match=match):
        dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=recipe)


def test_the_forward_recipe_refuses_c(fake_cuda):
    a = (_empty((64, 256), FP8), _empty((64, 2)))
    b = (_empty((384, 256), FP8), _empty((3, 2)))
    d = _empty((64, 384), torch.bfloat16)
    with pytest.raises(ValueError, match=r"c \(accumulation\) needs recipe=\(1, 1, 128\)"):
        dgemm.fp8_gemm_nt(a, b, d, c=_empty((64, 384)))
    # ... and (1, 128, 128) without c is today's GEMM: bf16 [m, n], one forward operator.
    assert dgemm.fp8_gemm_nt(a, b, d, recipe=(1, 128, 128)) is d


# --- dense wgrad validation -------------------------------------------------------------------
def test_dense_wgrad_returns_d_under_fake_mode(fake_cuda):
    a, b, d, c = dense()
    assert dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD) is d
    assert dgemm.fp8_gemm_nt(a, b, c, c=c, recipe=WGRAD) is c
    assert not torch.cuda.is_initialized()


@pytest.mark.parametrize("m, n", [(1, 1), (129, 257), (0, 384), (7, 4099)])
def test_dense_wgrad_takes_odd_and_empty_m_and_n(m, n, fake_cuda):
    a, b, d, c = dense(m=m, n=n)
    assert dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD) is d


def test_dense_wgrad_takes_zero_tokens(fake_cuda):
    a, b, d, c = dense(k=0)
    assert dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD) is d


def _replace(args, index, value):
    args = list(args)
    args[index] = value
    return args


BAD_DENSE = {
    "d missing": (lambda a, b, d, c: (a, b, None, c), TypeError, r"d \(the fp32 output\) is required"),
    "c missing": (lambda a, b, d, c: (a, b, d, None), TypeError, r"c \(the fp32 tensor to accumulate onto\) is required"),
    "bf16 d": (lambda a, b, d, c: (a, b, d.bfloat16(), c), TypeError, r"d must be float32 \(the fp32 output\)"),
    "bf16 c": (lambda a, b, d, c: (a, b, d, c.bfloat16()), TypeError, r"c must be float32"),
    "block scales for b": (lambda a, b, d, c: (a, (b[0], _empty((3, 4))), d, c), ValueError,
                           r"b\[1\] \(scales\) must have shape \(n, k / 128\): one scale per row and 128 K, not per 128x128 block = \(384, 4\); got \(3, 4\)"),
    "a scales": (lambda a, b, d, c: ((a[0], _empty((256, 3))), b, d, c), ValueError,
                 r"a\[1\] \(scales\) must have shape \(m, k / 128\) = \(256, 4\)"),
    "bf16 a": (lambda a, b, d, c: ((a[0].bfloat16(), a[1]), b, d, c), TypeError,
               r"a\[0\] must be float8_e4m3fn.*per_token_cast_to_fp8"),
    "k mismatch": (lambda a, b, d, c: (a, (_empty((384, 256), FP8), _empty((384, 2))), d, c),
                   ValueError, r"K \(the tokens\) differs"),
    "k not 128": (lambda a, b, d, c: ((_empty((256, 200), FP8), a[1]), (_empty((384, 200), FP8), b[1]), d, c),
                  ValueError, r"K \(the tokens\) must be a multiple of 128 \(0 allowed\); got K=200. Pad"),
    "3-D a": (lambda a, b, d, c: ((a[0].view(2, 128, 512), a[1]), b, d, c), ValueError, r"a\[0\] must be 2-D"),
    "d shape": (lambda a, b, d, c: (a, b, _empty((256, 383)), c), ValueError, r"d must have shape \(m, n\) = \(256, 384\)"),
    "c shape": (lambda a, b, d, c: (a, b, d, _empty((255, 384))), ValueError, r"c must have shape \(m, n\)"),
    "d transposed": (lambda a, b, d, c: (a, b, _empty((384, 256)).t(), c), ValueError, r"d must be contiguous"),
    "c transposed": (lambda a, b, d, c: (a, b, d, _empty((384, 256)).t()), ValueError, r"c must be contiguous"),
    "a not a pair": (lambda a, b, d, c: (a[0], b, d, c), TypeError, r"a must be a tuple \(fp8 tensor, fp32 scales\)"),
    "d a list": (lambda a, b, d, c: (a, b, [[0.0]], c), TypeError, r"d must be a torch.Tensor \(the fp32 output\); got list"),
    "c an int": (lambda a, b, d, c: (a, b, d, 0), TypeError, r"c must be a torch.Tensor \(accumulated onto\); got int"),
    "c on cpu": (lambda a, b, d, c: (a, b, d, _empty((256, 384), device="cpu")), RuntimeError, r"every tensor must be on cuda.*c is on cpu"),
}


@pytest.mark.parametrize("case", list(BAD_DENSE))
def test_every_malformed_dense_wgrad_input_raises_a_clear_error(case, fake_cuda):
    build, error, match = BAD_DENSE[case]
    a, b, d, c = build(*dense())
    with pytest.raises(error, match=match):
        dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD)


def test_overlapping_c_and_d_that_are_not_one_tensor_are_refused_on_real_tensors():
    a, b, _, _ = dense(device="cpu")
    buffer = torch.empty((257, 384))
    with pytest.raises(ValueError, match="c and d overlap in memory without being the same"):
        wgrad.checked_wgrad(a, b, buffer[1:], buffer[:256], real=True)


def test_dense_wgrad_on_cpu_tensors_names_the_device():
    a, b, d, c = dense(device="cpu")
    with pytest.raises(RuntimeError, match="tensors must be on a CUDA device"):
        dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD)


# --- k-grouped validation ---------------------------------------------------------------------
def test_k_grouped_returns_d_under_fake_mode_with_zero_and_128_groups(fake_cuda):
    a, b, d, ks, layout, c = k_grouped(ks=(128, 0, 384, 0))
    assert dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=c) is d
    assert dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, c, ks, layout, c=c) is c


def test_k_grouped_with_every_group_empty_is_accepted(fake_cuda):
    a, b, d, ks, layout, c = k_grouped(ks=(0, 0))
    assert dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=c) is d


def _kg(**changes):
    def build(a, b, d, ks, layout, c):
        args = dict(a=a, b=b, d=d, ks=ks, layout=layout, c=c)
        args.update({k: v(args) if callable(v) else v for k, v in changes.items()})
        return args
    return build


BAD_K_GROUPED = {
    "ks a tensor": (_kg(ks=lambda x: torch.tensor([128, 0, 384])), TypeError, "ks_cpu must be a host list of ints"),
    "ks empty": (_kg(ks=[]), ValueError, "ks_cpu must name at least one group"),
    "ks float": (_kg(ks=[128.0, 0, 384]), TypeError, r"ks_cpu\[0\] must be an int"),
    "ks not 128": (_kg(ks=[100, 28, 384]), ValueError, r"ks_cpu\[0\] = 100: each group's K must be a multiple of 128 \(0 allowed\)"),
    "ks negative": (_kg(ks=[-128, 256, 384]), ValueError, r"ks_cpu\[0\] = -128"),
    "ks count": (_kg(ks=[128, 384]), ValueError, "ks_cpu names 2 groups but d has 3"),
    "a numel": (_kg(ks=[128, 128, 384]), ValueError, r"a\[0\] must be 1-D with sum\(ks_cpu\) \* m = 640 \* 256"),
    "a 2-D": (_kg(a=lambda x: (x["a"][0].view(256, 512), x["a"][1])), ValueError, r"a\[0\] must be 1-D"),
    "b scales": (_kg(b=lambda x: (x["b"][0], _empty((3, 4)))), ValueError, r"b\[1\] \(scales\) must have shape \(n, sum\(ks\) / 128\) = \(384, 4\)"),
    "layout dtype": (_kg(layout=lambda x: x["layout"].long()), TypeError, "grouped_layout must be int32"),
    "layout shape": (_kg(layout=lambda x: _empty((4,), torch.int32)), ValueError, r"grouped_layout must have shape \(groups,\) = \(3,\)"),
    "c missing": (_kg(c=None), TypeError, r"c \(the fp32 tensor to accumulate onto\) is required"),
    "d 2-D": (_kg(d=lambda x: _empty((256, 384))), ValueError, r"d must be 3-D \(groups, m, n\)"),
    "c shape": (_kg(c=lambda x: _empty((3, 256, 385))), ValueError, r"c must have shape \(groups, m, n\)"),
    "bf16 d": (_kg(d=lambda x: x["d"].bfloat16()), TypeError, "d must be float32"),
    "d a list": (_kg(d=[1.0]), TypeError, r"d must be a torch.Tensor \(the fp32 output\)"),
    "c a float": (_kg(c=1.0), TypeError, r"c must be a torch.Tensor"),
}


@pytest.mark.parametrize("case", list(BAD_K_GROUPED))
def test_every_malformed_k_grouped_input_raises_a_clear_error(case, fake_cuda):
    build, error, match = BAD_K_GROUPED[case]
    x = build(*k_grouped())
    with pytest.raises(error, match=match):
        dgemm.k_grouped_fp8_gemm_nt_contiguous(x["a"], x["b"], x["d"], x["ks"], x["layout"],
                                               c=x["c"])


@pytest.mark.parametrize("recipe", [None, (1, 128, 128), (1, 1, 64)])
def test_k_grouped_takes_only_the_wgrad_recipe(recipe, fake_cuda):
    a, b, d, ks, layout, c = k_grouped()
    with pytest.raises(ValueError, match=r"recipe"):
        dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=c, recipe=recipe)


# --- operators --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fp8_wgrad", "fp8_wgrad_accumulate", "k_grouped_fp8_wgrad",
                                  "k_grouped_fp8_wgrad_accumulate"])
def test_the_wgrad_operators_declare_that_they_write_only_d(name):
    schema = getattr(torch.ops.dgemm, name).default._schema
    written = [arg.name for arg in schema.arguments
               if arg.alias_info is not None and arg.alias_info.is_write]
    assert written == ["d"] and len(schema.returns) == 0
    assert ("c" in [arg.name for arg in schema.arguments]) == ("accumulate" not in name)


CALLS = {
    "dense": (lambda a, b, d, c: dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD), dense,
              ops.FP8_WGRAD),
    "dense d is c": (lambda a, b, d, c: dgemm.fp8_gemm_nt(a, b, c, c=c, recipe=WGRAD), dense,
                     ops.FP8_WGRAD_ACCUMULATE),
    "k_grouped": (lambda a, b, d, ks, layout, c: dgemm.k_grouped_fp8_gemm_nt_contiguous(
        a, b, d, ks, layout, c=c), k_grouped, ops.K_GROUPED_WGRAD),
    "k_grouped d is c": (lambda a, b, d, ks, layout, c: dgemm.k_grouped_fp8_gemm_nt_contiguous(
        a, b, c, ks, layout, c=c), k_grouped, ops.K_GROUPED_WGRAD_ACCUMULATE),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_compile_fullgraph_records_one_wgrad_operator_and_no_graph_break(name, fake_cuda):
    fn, make, operator = CALLS[name]
    args = make()
    recorder = GraphRecorder()
    out = torch.compile(fn, backend=recorder, fullgraph=True)(*args)
    assert out.dtype == F32
    assert len(recorder.graphs) == 1
    assert recorder.targets() == [operator]


def test_a_wgrad_validation_error_under_fullgraph_carries_dgemms_message(fake_cuda):
    a, b, d, c = dense()
    compiled = torch.compile(CALLS["dense"][0], backend="eager", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported, match=r"b\[1\] \(scales\) must have"):
        compiled(a, (b[0], _empty((3, 4))), d, c)


@pytest.mark.parametrize("accumulate", [False, True])
def test_functionalization_sees_the_wgrad_operators_write_to_d(accumulate):
    forward_graphs = []

    def keep(gm, example_inputs):
        forward_graphs.append(gm)
        return gm

    def fn(a, sa, b, sb, c, d):
        if accumulate:
            torch.ops.dgemm.fp8_wgrad_accumulate(a, sa, b, sb, d)
        else:
            torch.ops.dgemm.fp8_wgrad(a, sa, b, sb, c, d)
        return d

    with FakeTensorMode(allow_non_fake_inputs=True):
        a, b, d, c = dense(device="cpu")
        torch.compile(fn, backend=aot_autograd(fw_compiler=keep), fullgraph=True)(
            a[0], a[1], b[0], b[1], c, d)
    code = forward_graphs[0].code
    assert "auto_functionalized" in code and "dgemm.fp8_wgrad" in code


def test_the_forward_gemm_keeps_its_direct_eager_path(monkeypatch):
    """recipe None (no c) never reaches the wgrad module: the forward path's checks run."""
    monkeypatch.setattr(wgrad, "wgrad_gemm_nt", lambda *a: pytest.fail("wgrad path taken"))
    a = (_empty((64, 256), FP8, "cpu"), _empty((64, 2), device="cpu"))
    b = (_empty((384, 256), FP8, "cpu"), _empty((3, 2), device="cpu"))
    with pytest.raises(RuntimeError, match="tensors must be on a CUDA device"):
        dgemm.fp8_gemm_nt(a, b, _empty((64, 384), torch.bfloat16, "cpu"))
    assert gemm._direct(a[0], a[1], b[0], b[1], None)


def test_a_wgrad_kernel_missing_during_graph_capture_names_the_way_to_warm_it():
    message = gemm.not_warm_message(("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 2048, 8), 0)
    assert message.startswith("k_grouped_fp8_gemm_nt_contiguous: m=4096, n=7168 on cuda:0")
    assert "dgemm.warmup(manifest=...)" in message and '"k_grouped"' in message
