"""GPU tests: skipped as a whole when no CUDA device is visible.

tests/conftest.py gives every test a fresh cache dir and clears DGEMM_* variables; the compiler
choice is the one exception kept here, so `DGEMM_JIT_COMPILER=nvcc pytest tests/gpu` works on a
machine whose NVRTC is unusable.
"""
from __future__ import annotations

import os

import pytest
import torch

_COMPILER_FROM_CALLER = os.environ.get("DGEMM_JIT_COMPILER")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "tests/gpu/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def keep_callers_compiler(fresh_dgemm_cache, monkeypatch):
    if _COMPILER_FROM_CALLER:
        monkeypatch.setenv("DGEMM_JIT_COMPILER", _COMPILER_FROM_CALLER)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


@pytest.fixture
def force_portable(monkeypatch):
    """Run the portable kernel even on Hopper (it is the oracle there)."""
    monkeypatch.setenv("DGEMM_FORCE_PORTABLE", "1")
