"""Make `import deep_gemm` load `dgemm.compat.deep_gemm`, in this process.

`install()` puts a finder first on `sys.meta_path`, so the alias wins over a real DeepGEMM
installed in the same environment (and over one found on `sys.path`): `deep_gemm` is
dgemm's module object itself, not a copy. Submodules (`deep_gemm.utils`, ...) are not
provided: `import deep_gemm.utils` fails with ModuleNotFoundError rather than mixing in the
real package's files. This module imports neither torch nor the rest of dgemm, so the
interpreter start-up hook that calls `install()` costs nothing until `deep_gemm` is imported.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

ALIAS = "deep_gemm"
TARGET = "dgemm.compat.deep_gemm"


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `deep_gemm` and hands back the already imported dgemm module."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != ALIAS:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(TARGET)

    def exec_module(self, module):
        pass                    # the target ran when it was imported


def install() -> None:
    """Idempotent: one finder, first on sys.meta_path."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
