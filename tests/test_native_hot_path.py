"""The C hot path (dgemm/native): it builds here, it is the same function as the Python
`gemm._cached` it replaces (keys, refusals, launches, errors), and it is built and loaded only
from a directory no one else can write to. tests/test_launch_plans.py runs every memo and
launch-plan test through both paths."""
import os
import stat

import pytest
import torch

import dgemm
from bench.stub_launch import CountingDriver, RecordingDriver, fp8_inputs, stubbed_launch
from dgemm import gemm, native
from dgemm.jit import launcher
from dgemm.kernels import plans

M, N, K = 64, 256, 512


@pytest.fixture
def c_path():
    hot = native.hot_path()
    assert hot is not None, native.status()
    return hot


def test_it_is_built_once_into_the_private_directory_and_loaded(c_path, native_dir):
    assert native.status() == f"loaded from {native_dir / native.library_name(native.compiler())}"
    library = native_dir / native.library_name(native.compiler())
    found = library.stat()
    assert found.st_uid == os.geteuid() and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert not [p for p in native_dir.iterdir() if p.name.startswith(".build-")]


def test_the_first_memoised_call_routes_calls_through_it(c_path, monkeypatch):
    monkeypatch.setattr(gemm, "_hot", gemm._cached)
    monkeypatch.setattr(gemm, "_hot_bound", False)
    with stubbed_launch():
        a, b, d = fp8_inputs(M, N, K)
        dgemm.fp8_gemm_nt(a, b, d)
        assert gemm._hot is c_path


def _calls():
    """(kind, a, b, t1, t2, extra) of each public GEMM, d given and d=None."""
    a, b, d = fp8_inputs(M, N, K)
    ga = (torch.zeros((4, M, K), dtype=torch.float8_e4m3fn), torch.ones((4, M, K // 128)))
    gb = (torch.zeros((4, N, K), dtype=torch.float8_e4m3fn), torch.ones((4, N // 128, K // 128)))
    gd = torch.empty((4, M, N), dtype=torch.bfloat16)
    masked_m = torch.full((4,), M, dtype=torch.int32)
    layout = torch.zeros(M, dtype=torch.int32)
    return [("fp8_gemm_nt", a, b, d, None, None), ("fp8_gemm_nt", a, b, None, None, None),
            ("m_grouped_fp8_gemm_nt_contiguous", a, gb, d, layout, None),
            ("m_grouped_fp8_gemm_nt_masked", ga, gb, gd, masked_m, M),
            ("fp8_gemm_nt", list(a), list(b), d, None, None)]


def test_its_keys_are_the_python_paths_keys(c_path):
    for call in _calls():
        key, out = c_path(*call)
        assert out is None and key is not None
        assert key == gemm._cached(*call)[0]
        assert hash(key) == hash(gemm._stored_key(key))


@pytest.mark.parametrize("what", ["no pair", "short pair", "no tensor", "unhashable extra"])
def test_it_refuses_to_memoise_what_the_python_path_refuses(c_path, what):
    a, b, d = fp8_inputs(M, N, K)
    call = {"no pair": ("fp8_gemm_nt", a[0], b, d, None, None),
            "short pair": ("fp8_gemm_nt", a[:1], b, d, None, None),
            "no tensor": ("fp8_gemm_nt", (1, 2), b, d, None, None),
            "unhashable extra": ("m_grouped_fp8_gemm_nt_masked", a, b, d, None, [M])}[what]
    assert c_path(*call) == (None, None) == gemm._cached(*call)


def test_under_a_mode_or_a_trace_nothing_is_memoised(c_path):
    from torch._subclasses.fake_tensor import FakeTensorMode
    a, b, d = fp8_inputs(M, N, K)
    with FakeTensorMode():
        assert c_path("fp8_gemm_nt", a, b, d, None, None) == (None, None)
    assert c_path("fp8_gemm_nt", a, b, d, None, None)[0] is not None


class _FailingDriver(RecordingDriver):
    def __init__(self, types_for, launch_error=0, replace_error=0):
        super().__init__(types_for)
        self.launch_error, self.replace_error = launch_error, replace_error

    def cuLaunchKernelEx(self, *args):
        super().cuLaunchKernelEx(*args)
        return self.launch_error

    def cuTensorMapReplaceAddress(self, *args):
        return self.replace_error or super().cuTensorMapReplaceAddress(*args)


@pytest.mark.parametrize("hot", ["c", "python"])
def test_a_failed_launch_or_re_pointing_raises_the_same_error_on_both_paths(
        c_path, hot, monkeypatch):
    monkeypatch.setattr(gemm, "_hot", c_path if hot == "c" else gemm._cached)
    monkeypatch.setattr(gemm, "_hot_bound", True)
    with stubbed_launch() as recording:
        a, b, d = fp8_inputs(M, N, K)
        dgemm.fp8_gemm_nt(a, b, d)                       # memoised
        launcher.set_driver(_FailingDriver(recording._types_for, launch_error=700))
        from dgemm.jit.runtime import error_text
        with pytest.raises(RuntimeError) as failed:
            dgemm.fp8_gemm_nt(a, b, d)
        assert "cuLaunchKernelEx failed" in str(failed.value)
        assert str(failed.value).endswith(error_text(700))
        launcher.set_driver(_FailingDriver(recording._types_for, replace_error=1))
        moved = (torch.zeros_like(a[0]), a[1])           # A: re-pointed TMA maps
        with pytest.raises(RuntimeError, match=r"cuTensorMapReplaceAddress failed"):
            dgemm.fp8_gemm_nt(moved, b, d)
        plan = next(iter(plans._plans.values()))
        assert plan.pointers is None                     # nothing half-patched is trusted
        launcher.set_driver(recording)
        dgemm.fp8_gemm_nt(moved, b, d)                   # re-patched in full
        assert recording.launches[-1].params[9]["address"] == moved[0].data_ptr()


class _RaisingDriver(RecordingDriver):
    def cuLaunchKernelEx(self, *args):
        raise KeyError("the stand-in's own error")


@pytest.mark.parametrize("hot", ["c", "python"])
def test_a_stand_in_drivers_exception_reaches_the_caller_on_both_paths(c_path, hot,
                                                                        monkeypatch):
    monkeypatch.setattr(gemm, "_hot", c_path if hot == "c" else gemm._cached)
    monkeypatch.setattr(gemm, "_hot_bound", True)
    with stubbed_launch() as recording:
        a, b, d = fp8_inputs(M, N, K)
        dgemm.fp8_gemm_nt(a, b, d)                       # memoised
        launcher.set_driver(_RaisingDriver(recording._types_for))
        with pytest.raises(KeyError, match="the stand-in's own error"):
            dgemm.fp8_gemm_nt(a, b, d)
        assert launcher._stand_in_errors == []


def test_a_fast_call_with_a_malformed_native_tuple_raises_instead_of_reading_past_it(c_path):
    with stubbed_launch():
        a, b, d = fp8_inputs(M, N, K)
        dgemm.fp8_gemm_nt(a, b, d)
        key = gemm._stored_key(c_path("fp8_gemm_nt", a, b, d, None, None)[0])
        fast = gemm._fast_calls[key][0]
        fast.native = (fast.matches,)
        with pytest.raises(TypeError, match="5-tuple"):
            c_path("fp8_gemm_nt", a, b, d, None, None)


class _Unhashable:
    def __hash__(self):
        raise ValueError("no hash")


def test_a_value_whose_hash_raises_is_not_memoised_on_either_path(c_path):
    a, b, d = fp8_inputs(M, N, K)
    call = ("m_grouped_fp8_gemm_nt_masked", a, b, d, None, (int, _Unhashable()))
    assert c_path(*call) == (None, None) == gemm._cached(*call)


def test_the_timing_stand_in_counts_launches_in_c(c_path):
    module = native.module_for_stubs()
    with stubbed_launch(record=False) as counting:
        assert isinstance(counting, CountingDriver)
        before = module.null_counts()[0]
        a, b, d = fp8_inputs(M, N, K)
        for _ in range(5):
            dgemm.fp8_gemm_nt(a, b, d)
        assert module.null_counts()[0] - before == 5


_PROBE = ("from dgemm import native; hot = native.hot_path(); "
          "print(json.dumps([hot is not None, native.status()]))")


@pytest.fixture
def probe(python_subprocess):
    """[whether a fresh process loads the C path, its status] under extra environment."""
    import json
    return lambda env: json.loads(
        python_subprocess(_PROBE, env).stdout.strip().splitlines()[-1])


def test_dgemm_native_0_turns_it_off(probe):
    assert probe({"DGEMM_NATIVE": "0"}) == [False, "disabled by DGEMM_NATIVE"]


def test_a_malformed_dgemm_native_leaves_the_python_path_and_says_why(probe):
    loaded, status = probe({"DGEMM_NATIVE": "maybe"})
    assert not loaded and "DGEMM_NATIVE='maybe' is not a boolean" in status


def test_a_failed_build_leaves_the_python_path(tmp_path, probe, python_subprocess):
    directory = tmp_path / "native"
    loaded, status = probe({"DGEMM_NATIVE_DIR": str(directory), "CC": "false"})
    assert not loaded and "false failed" in status
    assert [p.name for p in directory.iterdir()] == []      # no partial library left
    code = ("from bench.stub_launch import stubbed_launch, fp8_inputs\nimport dgemm\n"
            "from dgemm import gemm\n"
            "with stubbed_launch() as driver:\n"
            "    a, b, d = fp8_inputs(64, 256, 512)\n"
            "    for _ in range(3): dgemm.fp8_gemm_nt(a, b, d)\n"
            "    print(len(driver.launches), gemm._hot is gemm._cached)")
    out = python_subprocess(code, {"DGEMM_NATIVE_DIR": str(directory), "CC": "false"}).stdout
    assert out.split()[-2:] == ["3", "True"]


def test_a_compiler_setting_that_does_not_parse_leaves_the_python_path(tmp_path, probe):
    loaded, status = probe({"DGEMM_NATIVE_DIR": str(tmp_path / "native"), "CC": 'gcc "'})
    assert not loaded and "No closing quotation" in status


def test_a_directory_others_can_write_is_not_used(tmp_path, probe):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    loaded, status = probe({"DGEMM_NATIVE_DIR": str(shared)})
    assert loaded and not status.startswith(f"loaded from {shared}")
    assert list(shared.iterdir()) == []
    assert not os.path.exists(status.split("loaded from ")[1])   # the temporary copy is gone


def test_a_library_others_can_write_is_not_loaded(tmp_path, native_dir, probe):
    directory = tmp_path / "native"
    directory.mkdir(mode=0o700)
    planted = directory / native.library_name(native.compiler())
    planted.write_bytes((native_dir / planted.name).read_bytes())
    planted.chmod(0o666)
    loaded, status = probe({"DGEMM_NATIVE_DIR": str(directory)})
    assert not loaded and "not owned by this user alone" in status
