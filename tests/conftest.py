"""Shared CPU fixtures.

Every test gets a fresh, empty dgemm cache directory (DGEMM_CACHE_DIR), an environment free of
the user's DGEMM_* settings, zeroed counters and an empty memory tier. JIT tests that compile ask
for `test_kernels`: a copy of csrc/ whose two kernel headers are replaced by trivial kernels with
the same template parameters (tests/data/csrc), so the JIT path is tested in milliseconds per
compile and independently of the real kernels (tests/test_jit_real_kernels.py covers those).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _inherited_dgemm_variables() -> list:
    """Every DGEMM_* variable in this process's environment: all of them are cleared, not a
    list of known names, so a variable added later cannot leak from a developer's shell."""
    return [name for name in os.environ if name.startswith("DGEMM_")]


@pytest.fixture(scope="session")
def native_dir(tmp_path_factory) -> Path:
    """Where this session (and its subprocesses) build dgemm's C hot path once: not the
    user's ~/.cache/dgemm-native."""
    path = tmp_path_factory.mktemp("dgemm-native")
    path.chmod(0o700)
    return path


@pytest.fixture(autouse=True)
def fresh_dgemm_cache(tmp_path, monkeypatch, native_dir) -> Path:
    """An empty cache dir for this test; no inherited DGEMM_* settings; and no process state
    (stats, memory tier, disk or remote tier, circuit breaker) left over from an earlier test:
    one `dgemm.jit.state.reset()`."""
    for name in _inherited_dgemm_variables():
        monkeypatch.delenv(name)
    monkeypatch.delenv("DG_JIT_CACHE_DIR", raising=False)     # DeepGEMM's; read when unset
    cache_dir = tmp_path / "dgemm-cache"
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("DGEMM_NATIVE_DIR", str(native_dir))
    # A stuck lock must fail a test, not hang the suite.
    monkeypatch.setenv("DGEMM_LOCK_TIMEOUT", "60")
    _reset_jit_state()
    yield cache_dir
    _reset_jit_state()


def _reset_jit_state() -> None:
    if "dgemm.jit" in sys.modules:
        import dgemm.jit.state
        dgemm.jit.state.reset()


@pytest.fixture(scope="session")
def test_csrc(tmp_path_factory) -> Path:
    """csrc/ with the real helpers and the trivial test kernels from tests/data/csrc."""
    root = tmp_path_factory.mktemp("csrc")
    shutil.copytree(REPO / "csrc", root, dirs_exist_ok=True)
    shutil.copytree(REPO / "tests" / "data" / "csrc", root, dirs_exist_ok=True)
    return root


@pytest.fixture
def test_kernels(test_csrc, monkeypatch) -> Path:
    """Compile the trivial test kernels in this test (and in its subprocesses)."""
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(test_csrc))
    return test_csrc


@pytest.fixture
def spec():
    """A real Hopper spec; with `test_kernels` it compiles to the trivial test kernel."""
    from dgemm.heuristics import select
    return select("fp8_gemm_nt", 128, 4096, 7168)


@pytest.fixture(scope="session")
def precompiled_cache(tmp_path_factory, test_csrc) -> tuple:
    """(cache dir, key) holding the NVRTC build of the `spec` fixture's test kernel, compiled
    once per session; `warm_cache` copies it into a test's fresh cache dir."""
    root = tmp_path_factory.mktemp("precompiled") / "dgemm-cache"
    result = run_python(
        "from dgemm.heuristics import select\n"
        "import dgemm.jit\n"
        "print(json.dumps(dgemm.jit.ensure_compiled(select('fp8_gemm_nt', 128, 4096, 7168))))\n",
        dict(dict.fromkeys(_inherited_dgemm_variables()), DGEMM_CACHE_DIR=str(root),
             DGEMM_CSRC_DIR=str(test_csrc)))
    return root, json.loads(result.stdout.splitlines()[-1])


@pytest.fixture
def warm_cache(precompiled_cache, fresh_dgemm_cache, test_kernels) -> str:
    """This test's cache dir already holds the `spec` fixture's kernel; returns its key."""
    root, key = precompiled_cache
    shutil.copytree(root, fresh_dgemm_cache, dirs_exist_ok=True)
    return key


def run_python(code: str, extra_env: dict = None, check: bool = True,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter at the repo root (json and os pre-imported), with
    os.environ updated by `extra_env` (a None value removes the variable)."""
    environment = dict(os.environ)
    for name, value in (extra_env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), environment.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, "-c", "import json, os\n" + code],
                            cwd=REPO, env=environment, capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stderr}")
    return result


@pytest.fixture
def python_subprocess():
    """`run_python` as a fixture, for tests that start other interpreters."""
    return run_python


@pytest.fixture
def fake_cuda():
    """FakeTensorMode: fake CUDA tensors on a machine without a GPU (the ops' fake kernels)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        yield mode


@pytest.fixture
def fresh_dynamo():
    """torch.compile's caches reset around the test (modules tracing dgemm opt in)."""
    import torch._dynamo
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
