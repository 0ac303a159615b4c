"""The real kernels in csrc/ compile to cubins for their arch with both compilers (CPU only),
and what Python launches them with is what the compiled kernels expect.

Kept apart from the JIT tests (which use trivial stand-in kernels) so that a broken kernel header
fails here, by name, without hiding whether the JIT machinery itself works.
- Every preset spec of each family goes through NVRTC's front end (template instantiation and
  every static_assert, ~0.1 s a spec): the generated source instantiates the header's check of
  Python's plan (shared memory, threads, TMA store) and the kernel asserts its register budget,
  so a plan that drifted from the header fails here.
- Representative specs are compiled to cubins with both compilers, and the cubin's own record of
  the kernel (.nv.info: threads per block, the size of every parameter) is compared with the
  family's numbers (`num_threads`, the `ARGS` layout the launcher packs).
"""
import concurrent.futures
import ctypes
import multiprocessing
import os

import pytest
from cuda.bindings import nvrtc

from dgemm import kernels
from dgemm.heuristics import KINDS, select
from dgemm.jit import compiler as compiler_module
from dgemm.jit import elf, source
from dgemm.jobs import manifest as manifests
from dgemm.kernels import hopper_fp8, portable_fp8

ARCHS = ("sm_90a", "sm_80")


def _preset_specs() -> list:
    specs = set()
    for preset in manifests.available_presets():
        problems = manifests.problems(manifests.load_preset(preset), [], 0.3)
        for arch in ARCHS:
            specs.update(manifests.specs_for(problems, 132, arch))
    return sorted(specs, key=lambda s: s.to_json())


# Extra picks the presets may not reach: grouped kinds at both M, three warpgroups in
# clusters sharing A (the pick for 6144x4096x14336), and K-split pairs of every width class
# (half stored through TMA or with checked stores; N % 8 != 0; a straddling 160).
EXTRA_SPECS = list(dict.fromkeys(
    [select(kind, m, 4096, 7168, num_groups=4 if "grouped" in kind else 1, arch=arch)
     for arch in ARCHS for kind in KINDS for m in (128, 4096)]
    + [select("fp8_gemm_nt", 6144, 4096, 14336)]
    + [hopper_fp8.with_tile(select("fp8_gemm_nt", 128, n, k), 128, block_n, k_split=2)
       for n, k in ((4096, 7168), (1004, 512)) for block_n in (32, 64, 96, 128, 160, 256)]))
SPECS = list(dict.fromkeys(_preset_specs() + EXTRA_SPECS))


def _spec_id(spec) -> str:
    return (f"{spec.arch}-{spec.gemm_type}-n{spec.n}k{spec.k}g{spec.num_groups}-"
            f"{spec.block_m}x{spec.block_n}s{spec.num_stages}m{spec.num_tma_multicast}"
            + (f"ks{spec.k_split}" if spec.k_split > 1 else ""))


def _compile(spec, name: str = "nvrtc"):
    compiled = compiler_module.get_compiler(name).compile(spec, source.render(spec))
    return compiled.cubin, compiled.symbol


def _front_end(spec) -> str:
    """NVRTC's front end only (-fdevice-syntax-only): '' if the spec's source is accepted,
    else the compiler log."""
    compiler_module.get_compiler("nvrtc").version        # loads libnvrtc, or explains why not
    rendered = source.render(spec)
    options = [f.encode() for f in compiler_module.get_compiler("nvrtc").flags(spec)]
    options += [b"-fdevice-syntax-only", f"--include-path={rendered.include_dir}".encode()]
    _, program = nvrtc.nvrtcCreateProgram(rendered.text.encode(), b"dgemm_kernel.cu", 0, [], [])
    try:
        (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        if result == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return ""
        _, size = nvrtc.nvrtcGetProgramLogSize(program)
        log = bytearray(size)
        nvrtc.nvrtcGetProgramLog(program, log)
        return bytes(log).rstrip(b"\0").decode(errors="replace") or f"failed: {result}"
    finally:
        nvrtc.nvrtcDestroyProgram(program)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_every_preset_spec_passes_the_headers_checks_of_its_plan(spec):
    assert _front_end(spec) == ""


def _c_sizes(layout) -> tuple:
    return tuple(ctypes.sizeof(t) for t in layout.types)


COMPILERS = ("nvrtc", "nvcc")


@pytest.fixture(scope="session")
def cubins() -> dict:
    """(spec, compiler) -> (cubin, symbol) for the representative specs, compiled once per
    session on every CPU (each compile is single-threaded)."""
    jobs = [(spec, name) for spec in EXTRA_SPECS for name in COMPILERS]
    workers = max(1, min(len(jobs), len(os.sched_getaffinity(0))))
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return dict(zip(jobs, pool.map(_compile, *zip(*jobs))))


@pytest.mark.parametrize("name", COMPILERS)
@pytest.mark.parametrize("spec", EXTRA_SPECS, ids=_spec_id)
def test_the_compiled_kernel_matches_what_python_launches(spec, name, cubins):
    cubin, symbol = cubins[spec, name]
    info = elf.read_cubin(cubin)
    assert (info.machine, info.sm) == (elf.EM_CUDA, int(spec.arch[3:5]))
    assert info.entry_symbols == (symbol,)
    assert spec.cpp_instance().split("<")[0].split("::")[1] in symbol
    recorded = elf.kernel_info(cubin, symbol)
    assert recorded.max_threads == (spec.num_threads, 1, 1)
    assert recorded.param_sizes == _c_sizes(kernels.family(spec.kernel).ARGS)


@pytest.mark.parametrize("name", COMPILERS)
def test_a_kernel_compiles_to_the_same_bytes_in_another_process(name, cubins):
    """Ranks that compile the same spec get the same cubin (a namespace-scope constexpr
    variable once made NVRTC name a symbol with a per-compilation ID)."""
    spec = next(s for s in EXTRA_SPECS if s.arch == "sm_90a")
    assert _compile(spec, name)[0] == cubins[spec, name][0]


def test_the_specs_include_every_tile_kind_the_large_m_picks_use():
    tiles = {(s.block_m, s.block_n, s.num_tma_multicast, s.multicast_on_a)
             for s in SPECS if s.arch == "sm_90a"}
    assert {(128, 256, 1, False), (128, 256, 2, False), (192, 128, 2, True)} <= tiles
    # K blocks that do not fill whole laps of the ring: the rotating walk is compiled too.
    assert any(s.k // 128 % s.num_stages for s in SPECS if s.arch == "sm_90a")
    assert {s.kernel for s in SPECS} == set(kernels.FAMILIES)


@pytest.mark.parametrize("family, planned", [
    ("hopper_fp8", "smem_bytes"), ("hopper_fp8", "num_threads"),
    ("hopper_fp8", "uses_tma_store"), ("portable_fp8", "smem_bytes"),
    ("portable_fp8", "num_threads")])
def test_a_plan_that_differs_from_the_header_fails_the_compile(family, planned, monkeypatch):
    module = {"hopper_fp8": hopper_fp8, "portable_fp8": portable_fp8}[family]
    spec = select("fp8_gemm_nt", 128, 4096, 7168,
                  arch="sm_90a" if family == "hopper_fp8" else "sm_80")
    assert _front_end(spec) == ""
    true_value = getattr(module, planned)
    monkeypatch.setattr(module, planned,
                        lambda s: (not true_value(s)) if planned == "uses_tma_store"
                        else true_value(s) + 8)
    assert "static assertion failed" in _front_end(spec)


def test_a_tile_whose_shared_memory_exceeds_the_sm_is_refused_by_the_header():
    spec = select("fp8_gemm_nt", 4096, 7168, 16384)                  # 128x256, 3 stages
    too_deep = kernels.KernelSpec(**dict(vars(spec), num_stages=9))
    assert "exceeds the 232448 bytes" in _front_end(too_deep)
