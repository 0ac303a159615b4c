"""The wheel and the install: csrc/ travels inside the package, the console script is declared,
no package is left out, and CI runs the README's test command."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "dgemm", "cache_service", "csrc")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """A wheel built from a copy of the checkout (so no build/ or egg-info lands in the tree),
    offline and without build isolation to stay fast."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif origin.exists():
            source.mkdir(exist_ok=True)
            shutil.copy2(origin, source / name)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(work / "dist")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}\n{result.stderr}"
    (built,) = (work / "dist").glob("dgemm-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def repo_files(*roots: str, suffix: str = "") -> set[str]:
    return {path.relative_to(REPO).as_posix() for root in roots
            for path in (REPO / root).rglob(f"*{suffix}")
            if path.is_file() and "__pycache__" not in path.parts}


def test_the_wheel_ships_every_csrc_file_under_dgemm_csrc(wheel):
    shipped = {name for name in wheel.namelist() if name.startswith("dgemm/csrc/")}
    expected = {"dgemm/" + name for name in repo_files("csrc")}
    assert any(name.endswith(".cuh") for name in shipped)
    assert shipped == expected


def test_the_wheel_csrc_headers_are_byte_identical_to_the_checkout(wheel):
    for name in repo_files("csrc"):
        assert wheel.read("dgemm/" + name) == (REPO / name).read_bytes(), name


def test_the_wheel_declares_the_dgemm_cache_console_script(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert re.search(r"^\[console_scripts\]$", text, re.M)
    assert re.search(r"^dgemm-cache = dgemm\.cli:main$", text, re.M)


def test_the_wheel_contains_every_python_module_of_both_packages(wheel):
    missing = repo_files("dgemm", "cache_service", suffix=".py") - set(wheel.namelist())
    assert not missing, (f"{sorted(missing)} are not in the wheel: add their package to "
                         f"[tool.setuptools] packages in pyproject.toml")


def test_the_wheel_ships_the_shape_presets(wheel):
    assert "dgemm/shapes/deepseek_v3.json" in wheel.namelist()


def test_an_installed_wheel_compiles_from_its_own_csrc_with_the_checkouts_digest(
        wheel, tmp_path):
    site = tmp_path / "site"
    wheel.extractall(site)
    probe = ("from dgemm.jit import source; d = source.csrc_dir(); "
             "print(d); print(source.tree_digest(d))")
    # Run inside the unpacked wheel: the current directory comes first on sys.path, ahead of
    # the editable install of the checkout.
    result = subprocess.run([sys.executable, "-c", probe], cwd=site, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    csrc, digest = result.stdout.split()
    from dgemm.jit import source
    assert Path(csrc) == site / "dgemm" / "csrc"
    assert digest == source.tree_digest(REPO / "csrc")


def test_the_installed_checkout_compiles_from_the_repo_csrc(tmp_path):
    # From an unrelated directory, `dgemm` resolves through the (editable) install.
    result = subprocess.run(
        [sys.executable, "-c", "from dgemm.jit import source; print(source.csrc_dir())"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (f"is dgemm installed (pip install -e .)?\n"
                                    f"{result.stderr}")
    assert Path(result.stdout.strip()) == REPO / "csrc"


def readme_setup_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("<!-- setup-commands -->")[1].split("<!-- /setup-commands -->")[0]
    commands = re.findall(r"```(?:bash|sh)\n(.*?)\n```", section, re.S)
    assert len(commands) == 2, f"README must show exactly two set-up commands; got {commands}"
    return [command.strip() for command in commands]


def ci_lines() -> list[str]:
    return [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]


def test_ci_runs_exactly_the_readme_test_command():
    test_command = readme_setup_commands()[1]
    assert any(line.startswith(test_command + " ") or line == test_command
               for line in ci_lines()), f".ci/run does not run {test_command!r}"


def test_ci_installs_exactly_what_the_readme_set_up_command_installs():
    readme_installs = [part.strip() for part in readme_setup_commands()[0].split("&&")
                       if "pip install" in part]
    ci_installs = [" ".join(word for word in line.split() if word != "-q")
                   for line in ci_lines() if "pip install" in line]
    assert readme_installs and readme_installs == ci_installs
