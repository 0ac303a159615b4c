"""The DeepGEMM drop-in, on CPU: `dgemm.compat.deep_gemm` has DeepGEMM 54e2261's Hopper names
with its parameters (positional order, keywords, defaults) as recorded from its source in
tests/data/deep_gemm_54e2261_api.json (tools/record_deep_gemm_api.py), unsupported options
raise NotImplementedError naming the option, DG_JIT_CACHE_DIR is the disk tier's root when
DGEMM_CACHE_DIR is unset, and `python -m dgemm.compat` makes a child and a grandchild import
dgemm's module as `deep_gemm`, even with a real-looking deep_gemm installed."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dgemm.compat import alias
from dgemm.compat import deep_gemm as dg
from dgemm.jit import env

REPO = Path(__file__).resolve().parent.parent
API = json.loads((REPO / "tests" / "data" / "deep_gemm_54e2261_api.json").read_text())
FP8 = torch.float8_e4m3fn
BF16 = torch.bfloat16
# Deliberate differences from DeepGEMM's signatures (module docstring of dgemm.compat.deep_gemm):
# the contiguous layout's fourth argument may come as `m_indices`, so it needs a default.
EXTRA_DEFAULTS = {("m_grouped_fp8_gemm_nt_contiguous", "grouped_layout"): None}
EXTRA_KEYWORD_ONLY = {"m_grouped_fp8_gemm_nt_contiguous": ["m_indices"]}
_KIND = {"POSITIONAL_ONLY": inspect.Parameter.POSITIONAL_ONLY,
         "POSITIONAL_OR_KEYWORD": inspect.Parameter.POSITIONAL_OR_KEYWORD}


# --- names and parameters -------------------------------------------------------------------------
def test_the_recorded_list_holds_the_hopper_api_the_issue_names():
    assert len(API["hopper_api"]) == 18
    assert API["training_api"] == ["k_grouped_fp8_gemm_nt_contiguous"]
    assert API["functions"]["fp8_m_grouped_gemm_nt_masked"]["alias_of"] == \
        "m_grouped_fp8_gemm_nt_masked"


@pytest.mark.parametrize("name", API["hopper_api"] + API["training_api"])
def test_every_hopper_name_takes_deep_gemms_parameters_in_order_with_its_defaults(name):
    recorded = API["functions"][name]["params"]
    params = list(inspect.signature(getattr(dg, name)).parameters.values())
    ours = [p for p in params if p.kind != inspect.Parameter.KEYWORD_ONLY]
    extra = [p.name for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY]
    assert extra == EXTRA_KEYWORD_ONLY.get(name, [])
    assert len(ours) == len(recorded), [p.name for p in ours]
    for param, want in zip(ours, recorded):
        assert param.kind == _KIND[want["kind"]], (name, param.name)
        if want["kind"] == "POSITIONAL_ONLY":
            continue                    # pybind11 names them arg0, arg1, ...: by position only
        assert param.name == want["name"]
        if "default" in want:
            default = want["default"]
            assert param.default == (tuple(default) if isinstance(default, list) else default), \
                (name, param.name)
        elif (name, param.name) in EXTRA_DEFAULTS:
            assert param.default == EXTRA_DEFAULTS[(name, param.name)]
        else:
            assert param.default is inspect.Parameter.empty, (name, param.name)


def test_the_masked_alias_is_the_same_function():
    assert dg.fp8_m_grouped_gemm_nt_masked is dg.m_grouped_fp8_gemm_nt_masked


def test_the_recorder_reproduces_the_checked_in_list_from_the_anchor_tarball():
    tarball = REPO / ".anchors" / "deepgemm-54e2261.tar.gz"
    if not tarball.exists():
        pytest.skip("the DeepGEMM 54e2261 tarball (.anchors/) is not in this checkout")
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import record_deep_gemm_api
    finally:
        sys.path.remove(str(REPO / "tools"))
    recorded = record_deep_gemm_api.record(tarball)
    assert recorded["functions"] == API["functions"]
    assert recorded["training_api"] == API["training_api"]


# --- calls and unsupported options (fake CUDA tensors: no GPU) ------------------------------------
def _dense(m=64, n=256, k=256):
    a = (torch.empty(m, k, dtype=FP8, device="cuda"), torch.empty(m, k // 128, device="cuda"))
    b = (torch.empty(n, k, dtype=FP8, device="cuda"),
         torch.empty((n + 127) // 128, k // 128, device="cuda"))
    return a, b, torch.empty(m, n, dtype=BF16, device="cuda")


def test_fp8_gemm_nt_with_vllms_keywords_runs_and_returns_none(fake_cuda):
    a, b, d = _dense()
    assert dg.fp8_gemm_nt(a, b, d, disable_ue8m0_cast=True) is None
    assert dg.fp8_gemm_nt(a, b, d, recipe=(1, 128, 128), compiled_dims="nk") is None
    assert dg.fp8_gemm_nt(a, b, d, recipe_a=(1, 128), recipe_b=(128, 128)) is None


def test_compile_fullgraph_traces_the_drop_in_without_a_graph_break(fake_cuda):
    import torch._dynamo
    torch._dynamo.reset()
    a, b, d = _dense()
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(lambda a, b, d: dg.fp8_gemm_nt(a, b, d), backend=keep,
                             fullgraph=True)
    compiled(a, b, d)
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.dgemm.fp8_gemm_nt.default]
    torch._dynamo.reset()


def test_the_contiguous_layout_is_accepted_fourth_by_position_or_either_keyword(fake_cuda):
    a = (torch.empty(256, 256, dtype=FP8, device="cuda"), torch.empty(256, 2, device="cuda"))
    b = (torch.empty(2, 256, 256, dtype=FP8, device="cuda"), torch.empty(2, 2, 2, device="cuda"))
    d = torch.empty(256, 256, dtype=BF16, device="cuda")
    layout = torch.empty(256, dtype=torch.int32, device="cuda")
    dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, disable_ue8m0_cast=True)
    dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, grouped_layout=layout)
    dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices=layout)
    with pytest.raises(TypeError, match=r"missing the fourth argument, grouped_layout"):
        dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d)
    with pytest.raises(TypeError, match=r"both grouped_layout and m_indices"):
        dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, m_indices=layout)


def test_the_masked_gemm_and_its_alias_run(fake_cuda):
    a = (torch.empty(2, 64, 256, dtype=FP8, device="cuda"), torch.empty(2, 64, 2, device="cuda"))
    b = (torch.empty(2, 256, 256, dtype=FP8, device="cuda"), torch.empty(2, 2, 2, device="cuda"))
    d = torch.empty(2, 64, 256, dtype=BF16, device="cuda")
    masked_m = torch.empty(2, dtype=torch.int32, device="cuda")
    dg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 32)
    dg.fp8_m_grouped_gemm_nt_masked(a, b, d, masked_m, 32, disable_ue8m0_cast=True)


@pytest.mark.parametrize("change, option", [
    (lambda a, b, d: dict(c=d), r"\bc \(accumulating"),
    (lambda a, b, d: dict(recipe=(1, 1, 32)), r"recipe=\(1, 1, 32\)"),
    (lambda a, b, d: dict(recipe=(1, 128, 32)), r"recipe=\(1, 128, 32\)"),
    (lambda a, b, d: dict(recipe_a=(1, 128), recipe_b=(1, 32)), r"recipe_b=\(1, 32\)"),
    (lambda a, b, d: dict(a=(a[0], a[1].to(torch.int32))), r"packed UE8M0 scales \(a\[1\]"),
    (lambda a, b, d: dict(b=(b[0].view(torch.int8), b[1])), r"FP4 operands \(b\[0\]"),
    (lambda a, b, d: dict(a=(torch.empty(256, 64, dtype=FP8, device="cuda").t(), a[1])),
     r"MN-major a\[0\]"),
    (lambda a, b, d: dict(d=d.float()), r"FP32 output d"),
])
def test_unsupported_options_raise_not_implemented_error_naming_the_option(change, option,
                                                                             fake_cuda):
    a, b, d = _dense()
    arguments = dict(a=a, b=b, d=d, disable_ue8m0_cast=True)
    arguments.update(change(a, b, d))
    with pytest.raises(NotImplementedError, match=option):
        dg.fp8_gemm_nt(**arguments)


# --- the training entry points (recipe (1, 1, 128)) ---------------------------------------------
F32 = torch.float32


def _wgrad_pairs(m=256, n=384, k=512):
    a = (torch.empty(m, k, dtype=FP8, device="cuda"), torch.empty(m, k // 128, device="cuda"))
    b = (torch.empty(n, k, dtype=FP8, device="cuda"), torch.empty(n, k // 128, device="cuda"))
    return a, b, torch.empty(m, n, dtype=F32, device="cuda")


def _k_grouped_args(ks=(128, 0, 384), m=256, n=384):
    """DeepGEMM's own test layout: 1-D K-major groups back to back, MN-major scale views."""
    total, groups = sum(ks), len(ks)
    a = (torch.empty(total * m, dtype=FP8, device="cuda"),
         torch.empty(total // 128, m, device="cuda").t())
    b = (torch.empty(total * n, dtype=FP8, device="cuda"),
         torch.empty(total // 128, n, device="cuda").t())
    layout = torch.empty(groups, dtype=torch.int32, device="cuda")
    return a, b, torch.empty(groups, m, n, dtype=F32, device="cuda"), list(ks), layout


def _traced_ops(fn, *args):
    """The call_function targets of `fn(*args)` traced with torch.compile(fullgraph=True)."""
    import torch._dynamo
    torch._dynamo.reset()
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch.compile(fn, backend=keep, fullgraph=True)(*args)
    torch._dynamo.reset()
    return [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("recipe", [dict(recipe=(1, 1, 128)), dict(recipe=[1, 1, 128]),
                                    dict(recipe_a=(1, 128), recipe_b=(1, 128))])
def test_fp8_gemm_nt_with_c_and_the_wgrad_recipe_is_dgemms_weight_gradient(recipe, fake_cuda):
    a, b, d = _wgrad_pairs()
    c = torch.empty_like(d)
    assert dg.fp8_gemm_nt(a, b, d, c=c, compiled_dims="nk", disable_ue8m0_cast=True,
                          **recipe) is None
    assert dg.fp8_gemm_nt(a, b, d, d, **recipe) is None             # c positional, d is c
    assert _traced_ops(lambda a, b, c, d: dg.fp8_gemm_nt(a, b, d, c=c, **recipe), a, b, c, d) \
        == [torch.ops.dgemm.fp8_wgrad.default]
    assert _traced_ops(lambda a, b, d: dg.fp8_gemm_nt(a, b, d, c=d, **recipe), a, b, d) \
        == [torch.ops.dgemm.fp8_wgrad_accumulate.default]


def test_the_drop_in_weight_gradient_keeps_dgemms_checks(fake_cuda):
    a, b, d = _wgrad_pairs()
    with pytest.raises(TypeError, match=r"c \(the fp32 tensor to accumulate onto\) is required"):
        dg.fp8_gemm_nt(a, b, d, recipe=(1, 1, 128))
    bf16_d = d.to(BF16)
    with pytest.raises(TypeError, match=r"\bd\b.*float32"):
        dg.fp8_gemm_nt(a, b, bf16_d, c=bf16_d, recipe=(1, 1, 128))


def test_k_grouped_takes_deep_gemms_layout_positionally_and_by_keyword(fake_cuda):
    a, b, d, ks, layout = _k_grouped_args()
    c = torch.empty_like(d)
    assert dg.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c) is None
    assert dg.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks_cpu=ks, grouped_layout=layout, c=c,
                                               recipe=(1, 1, 128), compiled_dims="mn",
                                               use_psum_layout=False) is None
    assert _traced_ops(lambda a, b, d: dg.k_grouped_fp8_gemm_nt_contiguous(
        a, b, d, ks, layout, c=d), a, b, d) == [torch.ops.dgemm.k_grouped_fp8_wgrad_accumulate
                                                .default]


def test_k_grouped_reads_only_the_element_count_of_a_contiguous_operand(fake_cuda):
    a, b, d, ks, layout = _k_grouped_args()
    total = sum(ks)
    a2 = (a[0].view(total, -1), a[1])             # [sum K, m]: DeepGEMM checks numel only
    assert dg.k_grouped_fp8_gemm_nt_contiguous(a2, b, d, ks, layout, c=d) is None
    with pytest.raises(ValueError, match=r"a\[0\] must be 1-D with sum\(ks_cpu\) \* m"):
        short = torch.empty(a[0].numel() - 128, dtype=FP8, device="cuda")
        dg.k_grouped_fp8_gemm_nt_contiguous((short, a[1]), b, d, ks, layout, c=d)


@pytest.mark.parametrize("change, option", [
    (dict(use_psum_layout=True), r"use_psum_layout=True"),
    (dict(recipe=(1, 1, 32)), r"recipe=\(1, 1, 32\)"),
    (dict(recipe=(1, 128, 128)), r"recipe=\(1, 128, 128\)"),
    (dict(a="int32 scales"), r"packed UE8M0 scales \(a\[1\]"),
    (dict(b="fp4"), r"FP4 operands \(b\[0\]"),
])
def test_k_grouped_options_dgemm_cannot_honour_raise_not_implemented_error(change, option,
                                                                           fake_cuda):
    a, b, d, ks, layout = _k_grouped_args()
    arguments = dict(a=a, b=b, d=d, ks_cpu=ks, grouped_layout=layout, c=d)
    if change.get("a") == "int32 scales":
        change = dict(a=(a[0], a[1].to(torch.int32)))
    if change.get("b") == "fp4":
        change = dict(b=(b[0].view(torch.int8), b[1]))
    arguments.update(change)
    with pytest.raises(NotImplementedError, match=option):
        dg.k_grouped_fp8_gemm_nt_contiguous(**arguments)


def test_the_m_grouped_gemms_refuse_the_weight_gradient_recipe(fake_cuda):
    a = (torch.empty(256, 256, dtype=FP8, device="cuda"), torch.empty(256, 2, device="cuda"))
    b = (torch.empty(2, 256, 256, dtype=FP8, device="cuda"), torch.empty(2, 256, 2, device="cuda"))
    d = torch.empty(256, 256, dtype=BF16, device="cuda")
    layout = torch.empty(256, dtype=torch.int32, device="cuda")
    with pytest.raises(NotImplementedError, match=r"k_grouped_fp8_gemm_nt_contiguous"):
        dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, recipe=(1, 1, 128))
    with pytest.raises(NotImplementedError, match=r"weight-gradient recipe"):
        dg.m_grouped_fp8_gemm_nt_masked(a, b, d, layout, 64, recipe_a=(1, 128),
                                        recipe_b=(1, 128))


def test_psum_layout_raises_not_implemented_error(fake_cuda):
    a, b, d = _dense()
    with pytest.raises(NotImplementedError, match=r"use_psum_layout=True"):
        dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, torch.empty(2, dtype=torch.int32),
                                            use_psum_layout=True)


def test_a_recipe_and_a_recipe_pair_together_are_a_value_error(fake_cuda):
    a, b, d = _dense()
    with pytest.raises(ValueError, match=r"either recipe or the pair"):
        dg.fp8_gemm_nt(a, b, d, recipe=(1, 128, 128), recipe_a=(1, 128), recipe_b=(128, 128))


def test_casts_with_packed_scales_or_other_granularities_raise_not_implemented_error():
    x = torch.randn(4, 256)
    with pytest.raises(NotImplementedError, match=r"use_packed_ue8m0=True"):
        dg.per_token_cast_to_fp8(x, use_ue8m0=True, use_packed_ue8m0=True)
    with pytest.raises(NotImplementedError, match=r"gran_k=32"):
        dg.per_block_cast_to_fp8(x, False, gran_k=32)


def test_mk_alignments_that_are_not_multiples_of_128_raise_not_implemented_error():
    with pytest.raises(NotImplementedError, match=r"set_mk_alignment_for_contiguous_layout\(64\)"):
        dg.set_mk_alignment_for_contiguous_layout(64)
    dg.set_mk_alignment_for_contiguous_layout(256)
    assert dg.get_mk_alignment_for_contiguous_layout() == 256
    assert dg.get_theoretical_mk_alignment_for_contiguous_layout() == 128


def test_transform_sf_refuses_packed_scales_and_other_granularities():
    sf = torch.ones(64, 2)
    with pytest.raises(NotImplementedError, match=r"packed UE8M0"):
        dg.transform_sf_into_required_layout(sf.to(torch.int32), 64, 256, (1, 128, 128),
                                             is_sfa=True)
    with pytest.raises(NotImplementedError, match=r"granularity \(1, 32\)"):
        dg.transform_sf_into_required_layout(torch.ones(64, 8), 64, 256, (1, 32))


# --- helpers that behave like DeepGEMM's ----------------------------------------------------------
def test_per_token_cast_pads_any_width_and_ue8m0_scales_are_powers_of_two():
    x = torch.randn(3, 200)
    x_fp8, scales = dg.per_token_cast_to_fp8(x, use_ue8m0=True)
    assert x_fp8.shape == (3, 200) and scales.shape == (3, 2)
    assert torch.equal(torch.log2(scales), torch.log2(scales).round())
    back = (x_fp8.float().view(3, 200) * scales.repeat_interleave(128, dim=1)[:, :200])
    assert (back - x).abs().max() <= x.abs().max() / 8


def test_per_block_cast_matches_dgemms_own_cast_without_ue8m0():
    import dgemm
    x = torch.randn(256, 384)
    ours, ours_scales = dg.per_block_cast_to_fp8(x, use_ue8m0=False)
    plain, plain_scales = dgemm.per_block_cast_to_fp8(x)
    assert torch.allclose(ours_scales, plain_scales)
    assert (ours.float() - plain.float()).abs().max() <= 32   # one FP8 step at the top of range


def test_transform_sf_makes_per_row_scales_mn_major_and_keeps_block_scales():
    sfa = torch.randn(60, 2)
    out = dg.transform_sf_into_required_layout(sfa, 60, 256, (1, 128, 128), is_sfa=True)
    assert out.stride() == (1, 60) and torch.equal(out, sfa)
    sfb = torch.randn(2, 2)
    assert dg.transform_sf_into_required_layout(sfb, 256, 256, (1, 128, 128), is_sfa=False) \
        is sfb


def test_math_helpers_and_pdl_flag():
    assert dg.ceil_div(129, 128) == 2 and dg.align(129, 128) == 256
    assert dg.get_tma_aligned_size(5, 4) == 8
    dg.set_pdl(True)
    assert dg.get_pdl() is True


# --- DG_JIT_CACHE_DIR -----------------------------------------------------------------------------
def test_dg_jit_cache_dir_is_the_disk_root_when_dgemm_cache_dir_is_unset(monkeypatch, tmp_path):
    monkeypatch.delenv("DGEMM_CACHE_DIR")
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(tmp_path / "dg"))
    assert env.cache_dir() == tmp_path / "dg"
    assert env.Settings.from_env().cache_dir == tmp_path / "dg"
    assert env.cache_dir_source() == "DG_JIT_CACHE_DIR"


def test_dgemm_cache_dir_wins_over_dg_jit_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(tmp_path / "dg"))
    assert env.cache_dir() == tmp_path / "mine"


def test_doctor_shows_the_root_taken_from_dg_jit_cache_dir(monkeypatch, tmp_path):
    from dgemm.jobs import doctor
    monkeypatch.delenv("DGEMM_CACHE_DIR")
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(tmp_path / "dg"))
    check = doctor.check_cache_dir()
    assert str(tmp_path / "dg") in check.value and "from DG_JIT_CACHE_DIR" in check.value


# --- python -m dgemm.compat -----------------------------------------------------------------------
CHILD = """
import subprocess, sys
import deep_gemm
print("child", deep_gemm.__name__, deep_gemm.fp8_gemm_nt.__module__)
out = subprocess.run([sys.executable, "-c",
                      "import deep_gemm; print('grandchild', deep_gemm.__name__)"],
                     capture_output=True, text=True, timeout=120)
print(out.stdout.strip(), out.stderr.strip())
"""


def _compat(tmp_path, *command, extra_path=()):
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([*extra_path, str(REPO)]))
    return subprocess.run([sys.executable, "-m", "dgemm.compat", *command], cwd=tmp_path,
                          env=environ, capture_output=True, text=True, timeout=180)


def test_a_child_and_a_grandchild_started_through_dgemm_compat_import_dgemms_module(tmp_path):
    result = _compat(tmp_path, sys.executable, "-c", CHILD)
    assert result.returncode == 0, result.stderr
    assert "child dgemm.compat.deep_gemm dgemm.compat.deep_gemm" in result.stdout
    assert "grandchild dgemm.compat.deep_gemm" in result.stdout


def test_dgemms_module_wins_over_an_installed_deep_gemm_and_its_sitecustomize_still_runs(
        tmp_path):
    installed = tmp_path / "site-packages"
    (installed / "deep_gemm").mkdir(parents=True)
    (installed / "deep_gemm" / "__init__.py").write_text("raise SystemExit('real deep_gemm')\n")
    (installed / "sitecustomize.py").write_text("import os; os.environ['SHADOWED_RAN'] = '1'\n")
    script = ("import os, deep_gemm; print(deep_gemm.__name__, os.environ.get('SHADOWED_RAN'))")
    result = _compat(tmp_path, sys.executable, "-c", script, extra_path=[str(installed)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["dgemm.compat.deep_gemm", "1"]


def test_without_dgemm_compat_the_alias_is_not_installed(tmp_path):
    result = subprocess.run([sys.executable, "-c", "import deep_gemm"], cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "deep_gemm" in result.stderr


def test_a_child_loads_the_dgemm_that_python_m_dgemm_compat_ran_from(tmp_path):
    """A child whose PYTHONPATH kept only the hook, where another dgemm (or none) would be
    found, still loads the copy recorded in DGEMM_COMPAT_ROOT and gets the alias."""
    from dgemm.compat.__main__ import SITE_DIR
    environ = dict(os.environ, PYTHONPATH=str(SITE_DIR), DGEMM_COMPAT_ROOT=str(REPO))
    script = "import deep_gemm, dgemm; print(deep_gemm.__name__, dgemm.__file__)"
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=environ,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    name, location = result.stdout.split()
    assert name == "dgemm.compat.deep_gemm"
    assert Path(location) == REPO / "dgemm" / "__init__.py"


def test_the_exit_status_is_the_commands(tmp_path):
    result = _compat(tmp_path, sys.executable, "-c", "raise SystemExit(7)")
    assert result.returncode == 7


def test_no_command_is_a_usage_error_and_an_unknown_one_exits_127(tmp_path):
    assert _compat(tmp_path).returncode == 2
    missing = _compat(tmp_path, "no-such-command-dgemm")
    assert missing.returncode == 127 and "command not found: no-such-command-dgemm" in \
        missing.stderr


def test_installing_the_alias_in_process_is_idempotent():
    before = sys.meta_path[:]
    try:
        alias.install()
        alias.install()
        finders = [f for f in sys.meta_path if isinstance(f, alias._AliasFinder)]
        assert len(finders) == 1 and sys.meta_path[0] is finders[0]
        import importlib
        sys.modules.pop("deep_gemm", None)
        assert importlib.import_module("deep_gemm") is dg
    finally:
        sys.meta_path[:] = before
        sys.modules.pop("deep_gemm", None)
