"""dgemm.jit.key: stable across processes and machines' paths; changes with every input."""
import dataclasses
import json
import shutil

import pytest

from dgemm.heuristics import candidates, select
from dgemm.jit import compiler as compiler_module
from dgemm.jit import key as key_module
from dgemm.jit import source
from dgemm.kernels import hopper_fp8

KEY_CODE = ("from dgemm.heuristics import select\n"
            "from dgemm.jit import key, compiler\n"
            "print(key.key(select('fp8_gemm_nt', 128, 4096, 7168), compiler.get_compiler()))\n")


def _key(spec, name="nvrtc"):
    return key_module.key(spec, compiler_module.get_compiler(name))


def _copy_csrc(test_csrc, destination):
    shutil.copytree(test_csrc, destination)
    return destination


def test_a_key_is_64_hex_digits(test_kernels, spec):
    value = _key(spec)
    assert len(value) == 64 and int(value, 16) >= 0


def test_the_key_is_the_same_in_other_processes(test_kernels, spec, python_subprocess):
    others = {python_subprocess(KEY_CODE, {"PYTHONHASHSEED": str(seed)}).stdout.strip()
              for seed in (1, 2)}
    assert others == {_key(spec)}


def test_the_key_does_not_depend_on_the_cache_dir(test_kernels, spec, monkeypatch, tmp_path):
    first = _key(spec)
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert _key(spec) == first


def test_the_key_does_not_depend_on_where_csrc_lives(test_csrc, spec, monkeypatch, tmp_path):
    keys = set()
    for place in ("a", "b/deeper"):
        monkeypatch.setenv("DGEMM_CSRC_DIR", str(_copy_csrc(test_csrc, tmp_path / place)))
        keys.add(_key(spec))
    assert len(keys) == 1


def test_editing_any_header_changes_the_key(test_csrc, spec, monkeypatch, tmp_path):
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(_copy_csrc(test_csrc, tmp_path / "before")))
    before = _key(spec)
    edited = _copy_csrc(test_csrc, tmp_path / "after")
    helper = edited / "dgemm" / "utils.cuh"    # not the kernel header: an included helper
    helper.write_text(helper.read_text() + "// a comment is a change too\n")
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(edited))
    assert _key(spec) != before


def test_adding_a_header_file_changes_the_key(test_csrc, spec, monkeypatch, tmp_path):
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(_copy_csrc(test_csrc, tmp_path / "before")))
    before = _key(spec)
    grown = _copy_csrc(test_csrc, tmp_path / "after")
    (grown / "dgemm" / "new_helper.cuh").write_text("#pragma once\n")
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(grown))
    assert _key(spec) != before


def _other_values(spec) -> dict:
    """For every KernelSpec field, a value other than `spec`'s that is valid for it: taken from
    a spec the heuristic really picks for another problem, arch or SM count, or, for a field the
    heuristic never varies, the one listed in FIXED_FIELD_VALUES."""
    others = [select("fp8_gemm_nt", 128, 4096, 7168, arch="sm_80"),      # the portable family
              select("m_grouped_fp8_gemm_nt_masked", 128, 2112, 2048, num_groups=4),
              select("fp8_gemm_nt", 4096, 7168, 16384),                   # clusters sharing B
              select("fp8_gemm_nt", 6144, 4096, 14336),                   # 192 rows sharing A
              select("fp8_gemm_nt", 128, 4096, 7168, num_sms=78),
              # the K-split pair the autotuner times for a long-K shape with few tiles
              candidates("fp8_gemm_nt", 128, 2304, 16384, count=1)[-1]]
    values = dict(FIXED_FIELD_VALUES)
    for field in dataclasses.fields(spec):
        for other in others:
            if getattr(other, field.name) != getattr(spec, field.name):
                values.setdefault(field.name, getattr(other, field.name))
    return values


# The scaling recipe fixes block_k at 128 for every pick; the key must still cover it.
FIXED_FIELD_VALUES = {"block_k": 64}


def test_every_spec_field_enters_the_key(test_kernels, spec):
    # A 128-row tile, so that every other pick's width and cluster are valid for it too (the
    # fixture's shape picks 64x64, and a 64-row tile takes neither 256 columns nor clusters).
    spec = hopper_fp8.with_tile(spec, 128, 32)
    names = [field.name for field in dataclasses.fields(spec)]
    other_values = _other_values(spec)
    assert sorted(other_values) == sorted(names), "give each KernelSpec field another value"
    keys = {name: _key(dataclasses.replace(spec, **{name: other_values[name]}))
            for name in names}
    unchanged = _key(dataclasses.replace(spec))
    assert unchanged == _key(spec)
    assert [name for name in names if keys[name] == unchanged] == []
    assert len(set(keys.values())) == len(names)      # and no two changes collide


def test_the_two_compilers_give_different_keys(test_kernels, spec):
    assert _key(spec, "nvrtc") != _key(spec, "nvcc")


def test_debug_line_info_gives_a_different_key(test_kernels, spec, monkeypatch):
    release = _key(spec)
    monkeypatch.setenv("DGEMM_JIT_DEBUG", "1")
    assert _key(spec) != release


def test_the_rendered_source_includes_the_header_and_instantiates_the_spec(test_kernels, spec):
    text = source.render(spec).text
    assert f"#include <{spec.header}>" in text
    assert f"reinterpret_cast<void*>(&{spec.cpp_instance()})" in text
    assert json.loads(text.split("spec ", 1)[1].splitlines()[0]) == json.loads(spec.to_json())


def test_a_csrc_override_without_a_dgemm_directory_is_a_clear_error(monkeypatch, tmp_path,
                                                                     spec):
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="DGEMM_CSRC_DIR=.*no dgemm/ subdirectory"):
        source.render(spec)


def test_the_packaged_csrc_is_found_in_a_source_checkout():
    assert (source.csrc_dir() / "dgemm" / "utils.cuh").is_file()
