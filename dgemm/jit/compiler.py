"""The two compilers: NVRTC in process (default) and NVCC as a subprocess.

Both turn a `KernelSource` into a cubin for exactly `spec.arch` (no PTX, no fat binary) and read
the kernel symbol from the cubin's ELF symbol table. `flags(spec)` is what enters the cache key:
it never holds an absolute path (the include directory is added at compile time only), so a key
computed on a CPU-only prewarm host equals the one a GPU rank computes.

Flag choices, shared by both compilers so that the two produce the same program:
- `-std=c++17`, `-DNDEBUG`; `-lineinfo` only with DGEMM_JIT_DEBUG (it changes the key).
- No `--use_fast_math`: its flush-to-zero and approximate division would change results of the
  fp32 scale arithmetic; kernels call fast intrinsics explicitly where they want them.
- NVRTC needs `-default-device`: it rejects the (never called) host function that instantiates
  the kernel. Kernel headers must still annotate every function, or NVCC will not build them.
- NVCC gets `--expt-relaxed-constexpr` (NVRTC 13 rejects the option and needs no equivalent
  for annotated constexpr helpers) and `-O3` for host-side parity with its default pipeline.
"""
from __future__ import annotations

import abc
import ctypes
import dataclasses
import functools
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import elf, env, state
from .errors import CompileError

_ARCH_PATTERN = re.compile(r"^sm_(\d+)([af]?)$")

# Process state (state.reset() forgets it): compiler objects by (name, debug, executable), the
# loaded NVRTC binding, and nvcc versions by executable.
_compilers = state.table("jit.compilers")
_nvrtc = state.table("jit.nvrtc")
_nvcc_versions = state.table("jit.nvcc_versions")


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
    cubin: bytes
    symbol: str          # mangled name of the kernel's __global__ function
    log: str             # compiler output (warnings), possibly empty
    seconds: float       # wall time of the compile itself


class Compiler(abc.ABC):
    """`debug` adds line info (DGEMM_JIT_DEBUG); it is fixed per object, so `flags(spec)` and
    the key it feeds never read the environment."""
    name: str

    def __init__(self, debug: bool = False):
        self.debug = debug

    @property
    @abc.abstractmethod
    def version(self) -> str:
        """e.g. "13.0"; enters the key together with `name`."""

    @abc.abstractmethod
    def flags(self, spec) -> tuple:
        """Options that shape the cubin (part of the key); never absolute paths."""

    @abc.abstractmethod
    def compile(self, spec, source) -> CompiledKernel:
        """Compile `source` (a KernelSource); raise CompileError with the full log on failure."""

    @property
    def identity(self) -> str:
        """"<name> <version>", the form stored in entries and the key."""
        return f"{self.name} {self.version}"

    def _finish(self, spec, cubin: bytes, log: str, started: float) -> CompiledKernel:
        seconds = time.perf_counter() - started
        try:
            symbol = elf.kernel_symbol(cubin)
        except elf.ElfError as error:
            raise CompileError(f"{self.identity} produced an unusable cubin for spec "
                               f"{spec.to_json()}: {error}", log=log, spec=spec) from error
        return CompiledKernel(cubin=cubin, symbol=symbol, log=log, seconds=seconds)


def _arch_parts(spec) -> tuple:
    match = _ARCH_PATTERN.match(spec.arch)
    if match is None:
        raise ValueError(f"spec.arch must look like 'sm_90a' or 'sm_80'; got {spec.arch!r}")
    return match.group(1), match.group(2)


def _debug_flags(debug: bool) -> tuple:
    return ("-lineinfo",) if debug else ()


# ------------------------------------------------------------------------------------------------
# NVRTC
# ------------------------------------------------------------------------------------------------
_nvrtc_lock = threading.Lock()


def _nvrtc_library_candidates() -> list:
    """libnvrtc files a pip wheel or a CUDA toolkit may hold, for when cuda.bindings' own
    search (cuda.pathfinder) comes up empty."""
    directories = []
    for entry in sys.path:
        for relative in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"):
            directories.append(Path(entry) / relative)
    home = env.cuda_home()
    for root in ([home] if home else []) + [Path("/usr/local/cuda")]:
        directories += [root / "lib64", root / "lib"]
    found = []
    for directory in directories:
        if directory.is_dir():
            found += sorted(p for p in directory.glob("libnvrtc.so*")
                            if "builtins" not in p.name and ".alt." not in p.name)
    return found


def _load_nvrtc():
    """cuda.bindings.nvrtc, with its shared library loaded; CompileError with the fix if not."""
    with _nvrtc_lock:
        if "module" in _nvrtc:
            return _nvrtc["module"]
        try:
            from cuda.bindings import nvrtc
        except ImportError as error:
            raise CompileError(f"NVRTC is unavailable: cannot import cuda.bindings.nvrtc "
                               f"({error}). Install cuda-python, or set "
                               f"DGEMM_JIT_COMPILER=nvcc.") from error
        first_error = None
        try:
            nvrtc.nvrtcVersion()
        except Exception as error:    # the binding raises various types when dlopen fails
            first_error = error
            # Preload a libnvrtc we can find; cuda.bindings then picks up the loaded copy.
            for path in _nvrtc_library_candidates():
                try:
                    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                    nvrtc.nvrtcVersion()
                    first_error = None
                    break
                except Exception:
                    continue
        if first_error is not None:
            raise CompileError(
                f"NVRTC is unavailable: cuda.bindings could not load libnvrtc ({first_error}). "
                f"Install it with `pip install nvidia-cuda-nvrtc` (the dgemm[nvrtc] extra), set "
                f"CUDA_HOME to a toolkit that has lib64/libnvrtc.so, or set "
                f"DGEMM_JIT_COMPILER=nvcc.") from first_error
        _nvrtc["module"] = nvrtc
        return nvrtc


def _check(nvrtc, result, what: str) -> None:
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, message = nvrtc.nvrtcGetErrorString(result)
        raise CompileError(f"NVRTC {what} failed: {message.decode(errors='replace')}")


class NvrtcCompiler(Compiler):
    name = "nvrtc"

    @functools.cached_property
    def version(self) -> str:
        nvrtc = _load_nvrtc()
        result, major, minor = nvrtc.nvrtcVersion()
        _check(nvrtc, result, "nvrtcVersion")
        return f"{major}.{minor}"

    def flags(self, spec) -> tuple:
        _arch_parts(spec)
        return (f"--gpu-architecture={spec.arch}", "-std=c++17", "-default-device",
                "-DNDEBUG") + _debug_flags(self.debug)

    def compile(self, spec, source) -> CompiledKernel:
        nvrtc = _load_nvrtc()
        options = [f.encode() for f in self.flags(spec)]
        options.append(f"--include-path={source.include_dir}".encode())
        started = time.perf_counter()
        result, program = nvrtc.nvrtcCreateProgram(source.text.encode(), b"dgemm_kernel.cu",
                                                    0, [], [])
        _check(nvrtc, result, "nvrtcCreateProgram")
        try:
            (compiled,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
            log = self._log(nvrtc, program)
            if compiled != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                _, message = nvrtc.nvrtcGetErrorString(compiled)
                raise CompileError(
                    f"{self.identity} failed ({message.decode(errors='replace')}) for spec "
                    f"{spec.to_json()}\noptions: {' '.join(o.decode() for o in options)}\n"
                    f"{log}", log=log, spec=spec)
            result, size = nvrtc.nvrtcGetCUBINSize(program)
            _check(nvrtc, result, "nvrtcGetCUBINSize")
            cubin = bytearray(size)
            (result,) = nvrtc.nvrtcGetCUBIN(program, cubin)
            _check(nvrtc, result, "nvrtcGetCUBIN")
        finally:
            nvrtc.nvrtcDestroyProgram(program)
        return self._finish(spec, bytes(cubin), log, started)

    @staticmethod
    def _log(nvrtc, program) -> str:
        result, size = nvrtc.nvrtcGetProgramLogSize(program)
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
            return ""
        buffer = bytearray(size)
        nvrtc.nvrtcGetProgramLog(program, buffer)
        return bytes(buffer).rstrip(b"\0").decode(errors="replace")


# ------------------------------------------------------------------------------------------------
# NVCC
# ------------------------------------------------------------------------------------------------
def find_nvcc() -> str:
    """DGEMM_NVCC, else $CUDA_HOME/bin/nvcc, else nvcc on PATH."""
    explicit = env.nvcc_path()
    if explicit is not None:
        if shutil.which(explicit) is None:
            raise CompileError(f"DGEMM_NVCC={explicit!r} is not an executable; expected the "
                               f"path of nvcc")
        return explicit
    home = env.cuda_home()
    if home is not None and (home / "bin" / "nvcc").is_file():
        return str(home / "bin" / "nvcc")
    on_path = shutil.which("nvcc")
    if on_path is None:
        raise CompileError("nvcc not found: set DGEMM_NVCC to its path or CUDA_HOME to the CUDA "
                           "toolkit, or use DGEMM_JIT_COMPILER=nvrtc")
    return on_path


def _nvcc_version(nvcc: str) -> str:
    """`nvcc --version`'s X.Y.Z, run once per executable and process."""
    version = _nvcc_versions.get(nvcc)
    if version is None:
        output = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        match = re.search(r"release \d+\.\d+, V(\d+\.\d+\.\d+)", output)
        if match is None:
            raise CompileError(f"could not read the version of {nvcc}: expected 'release X.Y, "
                               f"VX.Y.Z' in `nvcc --version`, got:\n{output}")
        version = _nvcc_versions[nvcc] = match.group(1)
    return version


class NvccCompiler(Compiler):
    name = "nvcc"

    def __init__(self, executable: str = None, debug: bool = False):
        super().__init__(debug)
        self.executable = executable or find_nvcc()

    @property
    def version(self) -> str:
        return _nvcc_version(self.executable)

    def flags(self, spec) -> tuple:
        number, suffix = _arch_parts(spec)
        return ("-cubin", f"-gencode=arch=compute_{number}{suffix},code=sm_{number}{suffix}",
                "-std=c++17", "-O3", "--expt-relaxed-constexpr",
                "-DNDEBUG") + _debug_flags(self.debug)

    def compile(self, spec, source) -> CompiledKernel:
        with tempfile.TemporaryDirectory(prefix="dgemm-nvcc-") as workdir:
            source_path = Path(workdir) / "dgemm_kernel.cu"
            cubin_path = Path(workdir) / "dgemm_kernel.cubin"
            source_path.write_text(source.text)
            command = [self.executable, *self.flags(spec), "-I", str(source.include_dir),
                       "-o", str(cubin_path), str(source_path)]
            started = time.perf_counter()
            process = subprocess.run(command, capture_output=True, text=True)
            log = (process.stdout + process.stderr).strip()
            if process.returncode != 0:
                raise CompileError(
                    f"{self.identity} failed (exit {process.returncode}) for spec "
                    f"{spec.to_json()}\ncommand: {' '.join(command)}\n{log}", log=log, spec=spec)
            cubin = cubin_path.read_bytes()
        return self._finish(spec, cubin, log, started)


def get_compiler(name: str = None, debug: bool = None) -> Compiler:
    """The compiler named by `name` (else DGEMM_JIT_COMPILER, default nvrtc), with line info
    when `debug` (else DGEMM_JIT_DEBUG). The cache walk passes both from its `env.Settings`.
    One object per (name, debug, nvcc executable) per process, so a version is asked once."""
    name = name or env.jit_compiler()
    debug = env.jit_debug() if debug is None else debug
    if name == "nvrtc":
        memo = ("nvrtc", debug, None)
        make = functools.partial(NvrtcCompiler, debug)
    elif name == "nvcc":
        executable = find_nvcc()
        memo = ("nvcc", debug, executable)
        make = functools.partial(NvccCompiler, executable, debug)
    else:
        raise ValueError(f"unknown compiler {name!r}; expected 'nvrtc' or 'nvcc'")
    found = _compilers.get(memo)
    if found is None:
        found = _compilers.setdefault(memo, make())
    return found
