"""The package layers, checked by parsing every import with `ast` (nothing is imported):

    cache_service   the bottom layer: imports nothing from dgemm, so the two cannot form a cycle
    dgemm.jit       the generic JIT: imports nothing from the dgemm layers above it (heuristics,
                    gemm, kernels, jobs, cli, utils, ...), only dgemm.jit and below
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def package_of(path: Path) -> str:
    """The package a source file's relative imports are relative to."""
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    return module.removesuffix(".__init__") if path.name == "__init__.py" \
        else module.rpartition(".")[0]


def imported_modules(path: Path, package: str = None) -> set:
    """Absolute names of every module `path` imports (relative imports resolved against
    `package`, by default the file's own), including imports inside functions."""
    package = package or package_of(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.add(module)
            # `from pkg import submodule` imports pkg.submodule too.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def sources(package: str) -> list:
    return sorted((REPO / package).rglob("*.py"))


def _within(module: str, root: str) -> bool:
    return module == root or module.startswith(root + ".")


@pytest.mark.parametrize("path", sources("cache_service"), ids=lambda p: p.name)
def test_cache_service_imports_nothing_from_dgemm(path):
    offending = sorted(m for m in imported_modules(path) if _within(m, "dgemm"))
    assert offending == [], f"{path.relative_to(REPO)} imports {offending}; cache_service is " \
                            f"the bottom layer: inject what it needs from dgemm instead"


@pytest.mark.parametrize("path", sources("dgemm/jit"), ids=lambda p: p.name)
def test_the_jit_imports_no_dgemm_layer_above_it(path):
    offending = sorted(m for m in imported_modules(path)
                       if _within(m, "dgemm") and not _within(m, "dgemm.jit"))
    assert offending == [], f"{path.relative_to(REPO)} imports {offending}; dgemm.jit is " \
                            f"generic: take what it needs through the spec protocol instead"


def test_the_import_parser_resolves_relative_imports():
    found = imported_modules(REPO / "dgemm" / "jit" / "cache.py")
    assert {"dgemm.jit.remote", "dgemm.jit.state", "filelock"} <= found


def test_the_import_parser_catches_a_nested_relative_import_of_a_layer_above(tmp_path):
    probe = tmp_path / "probe.py"           # as dgemm/jit/key.py once imported heuristics
    probe.write_text("def f():\n    from .. import heuristics\n")
    assert "dgemm.heuristics" in imported_modules(probe, package="dgemm.jit")
