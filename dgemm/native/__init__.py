"""The cached-call path in C (`hot_path.c`), built on this host the first time a call is
memoised, then loaded from a private per-user directory.

`hot_path()` returns the loaded module's `cached_call`, the drop-in for `gemm._cached`, or
None; with None every call takes the Python path, which does the same work ~1 µs slower
per call on an H200 host (~7.0 against ~8.0 µs with d given: bench/NOTES.md, "h5"). None when `DGEMM_NATIVE=0`, or when the
build or load fails: no C compiler (`$CC`, else `cc`), no Python headers
(`sysconfig`'s include directory; Debian: `python3-dev`), or no private directory to keep
the library in. The reason is logged once at INFO and kept in `status()`.

Where: `$DGEMM_NATIVE_DIR`, else `$XDG_CACHE_HOME/dgemm-native` (`~/.cache/dgemm-native`),
created 0700. It must be owned by this user and writable by no one else, as must the
library: a library in it is loaded into the process, so a directory others can write to is
never used (the library is then built into a fresh private temporary directory for this
process, removed once loaded). It is checked and loaded through one descriptor opened without
following symlinks. Building happens inside the first memoised call (~0.3..0.5 s, once per
machine and source). The file name holds a digest of the source, the interpreter's ABI tag and the
compiler command, so an edit, another Python or another compiler builds anew; builds land by
an atomic rename, so processes that build at once do not see each other's partial files.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Callable, Optional

from ..jit import env, safe_files

_log = logging.getLogger("dgemm.native")
_SOURCE = Path(__file__).with_name("hot_path.c")
_MODULE = "dgemm_hot_path"              # PyInit_dgemm_hot_path in the source
_BUILD_TIMEOUT_S = 120
_lock = threading.Lock()
_state = {"tried": False, "module": None, "status": "not built yet"}


def enabled() -> bool:
    """DGEMM_NATIVE (default on); ConfigError when it is no boolean."""
    return env.get_bool("DGEMM_NATIVE", True)


def status() -> str:
    """Why the C path is or is not in use ("loaded from PATH", "disabled by DGEMM_NATIVE=0",
    "no C compiler ...")."""
    return _state["status"]


def library_dir() -> Path:
    explicit = os.environ.get("DGEMM_NATIVE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dgemm-native"


def compiler() -> list:
    """The C compiler command: `$CC` split like a shell would, else `cc` (then `gcc`)."""
    explicit = os.environ.get("CC")
    if explicit:
        return shlex.split(explicit)
    for name in ("cc", "gcc"):
        found = shutil.which(name)
        if found:
            return [found]
    raise OSError("no C compiler: set CC or install one (Debian: apt-get install gcc)")


def _include_dir() -> str:
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise OSError(f"no Python.h in {include} (Debian: apt-get install python3-dev)")
    return include


def _command(cc: list, include: str, output: str) -> list:
    return cc + ["-O2", "-shared", "-fPIC", "-std=c99", "-I", include, str(_SOURCE), "-o", output]


def library_name(cc: list) -> str:
    digest = hashlib.sha256()
    digest.update(_SOURCE.read_bytes())
    digest.update(sys.implementation.cache_tag.encode())
    digest.update(sysconfig.get_config_var("EXT_SUFFIX").encode())
    digest.update(" ".join(cc).encode())
    return f"{_MODULE}-{digest.hexdigest()[:20]}{sysconfig.get_config_var('EXT_SUFFIX')}"


def _private_dir(path: Path) -> Optional[str]:
    """None when `path` (created 0700 if missing) is a directory only this user can write."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return safe_files.private_dir_problem(path)
    except OSError as exc:
        return f"cannot be created ({exc})"


_MAX_LIBRARY_BYTES = 64 << 20


def _check_library(path: Path, found: os.stat_result) -> None:
    try:
        safe_files.check_private_regular(path, found, _MAX_LIBRARY_BYTES)
    except safe_files.UnsafeFileError as exc:
        raise OSError(f"{path} is not owned by this user alone: {exc}") from None


def build(directory: Path) -> Path:
    """The library for this source, interpreter and compiler in `directory` (a private
    directory), compiled there first when missing."""
    cc = compiler()
    include = _include_dir()
    target = directory / library_name(cc)
    if target.exists():
        return target
    handle, partial = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=directory)
    os.close(handle)
    try:
        done = subprocess.run(_command(cc, include, partial), capture_output=True, text=True,
                              timeout=_BUILD_TIMEOUT_S)
        if done.returncode != 0:
            raise OSError(f"{' '.join(cc)} failed (exit {done.returncode}): "
                          f"{done.stderr.strip()[-2000:]}")
        os.chmod(partial, 0o700)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def _load_from(path: Path):
    """The module in `path`, checked and loaded through one open descriptor (no symlink
    followed), so that the file checked is the file loaded."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _check_library(path, os.fstat(descriptor))
        opened = f"/proc/self/fd/{descriptor}"
        where = opened if os.path.exists(opened) else str(path)
        loader = importlib.machinery.ExtensionFileLoader(_MODULE, where)
        spec = importlib.util.spec_from_file_location(_MODULE, where, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    finally:
        os.close(descriptor)


def _build_and_load():
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        raise ImportError("a free-threaded Python: the C hot path relies on the GIL")
    directory = library_dir()
    if not directory.is_absolute():
        raise OSError(f"{directory} is a relative path (set DGEMM_NATIVE_DIR, HOME or "
                      f"XDG_CACHE_HOME to an absolute one)")
    problem = _private_dir(directory)
    if problem is None:
        path = build(directory)
        return _load_from(path), path
    _log.info("dgemm native: %s %s; building into a private temporary directory for this "
              "process", directory, problem)
    directory = Path(tempfile.mkdtemp(prefix="dgemm-native-"))
    try:
        path = build(directory)
        return _load_from(path), path
    finally:
        shutil.rmtree(directory, ignore_errors=True)     # a loaded library needs no file


def module_for_stubs():
    """The C module whatever DGEMM_NATIVE says, unconfigured (its `null_driver` for the
    GPU-free stand-in of bench/stub_launch.py); raises when it cannot be built."""
    return _build_and_load()[0]


def load():
    """The built and configured C module, or None (see `status()`); built at most once per
    process, whatever happens."""
    if _state["tried"]:
        return _state["module"]
    with _lock:
        if _state["tried"]:
            return _state["module"]
        module = None
        try:
            if not enabled():
                _state["status"] = "disabled by DGEMM_NATIVE"
            else:
                module, path = _build_and_load()
                _configure(module)
                _state["status"] = f"loaded from {path}"
        except Exception as exc:        # whatever fails here, the GEMMs run the Python path
            module = None
            _state["status"] = f"not in use: {exc}"
            _log.info("dgemm native hot path not in use (the Python path runs instead): %s",
                      exc)
        _state["module"] = module
        _state["tried"] = True
        return module


def _configure(module) -> None:
    from .. import gemm
    from ..jit import launcher
    from ..kernels import loader
    module.configure(
        gemm=vars(gemm), loader=vars(loader), launcher=vars(launcher),
        environ=env.launch_environ(), environ_keys=env.LAUNCH_KEYS,
        entry_points=launcher.entry_points, pointer_kind=launcher.POINTER,
        stream_offset=launcher.LaunchConfig.stream.offset)


def hot_path() -> Optional[Callable]:
    """The C `cached_call`, or None (the Python `_cached` then runs)."""
    module = load()
    return None if module is None else module.cached_call

