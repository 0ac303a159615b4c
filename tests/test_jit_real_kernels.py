"""The real kernels in csrc/ compile to cubins for their arch with both compilers (CPU only),
and what Python launches them with is what the compiled kernels expect.

Kept apart from the JIT tests (which use trivial stand-in kernels) so that a broken kernel header
fails here, by name, without hiding whether the JIT machinery itself works. Each family's preset
specs are compiled once per session (NVRTC, in parallel); every compile instantiates the
header's check of Python's plan (shared memory, threads, TMA store), so a plan that drifted from
the header fails to compile. The cubin's own record of each kernel (.nv.info: threads per block,
parameter sizes) is compared with the family's numbers.
"""
import concurrent.futures
import ctypes
import multiprocessing
import os

import pytest

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


# Extra picks the presets may not reach: grouped kinds at both M, and three warpgroups in
# clusters sharing A (the 4096-row pick for N = 2112).
EXTRA_SPECS = list(dict.fromkeys(
    [select(kind, m, 4096, 7168, num_groups=4 if "grouped" in kind else 1, arch=arch)
     for arch in ARCHS for kind in KINDS for m in (128, 4096)]
    + [select("fp8_gemm_nt", 4096, 2112, 7168)]))
SPECS = list(dict.fromkeys(_preset_specs() + EXTRA_SPECS))


def _spec_id(spec) -> str:
    return (f"{spec.arch}-{spec.gemm_type}-n{spec.n}k{spec.k}g{spec.num_groups}-"
            f"{spec.block_m}x{spec.block_n}s{spec.num_stages}m{spec.num_tma_multicast}")


def _compile(spec, name: str = "nvrtc"):
    compiled = compiler_module.get_compiler(name).compile(spec, source.render(spec))
    return compiled.cubin, compiled.symbol


@pytest.fixture(scope="session")
def nvrtc_cubins() -> dict:
    """spec -> (cubin, symbol), NVRTC, compiled once per session on every CPU."""
    workers = max(1, min(len(SPECS), len(os.sched_getaffinity(0))))
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return dict(zip(SPECS, pool.map(_compile, SPECS)))


def _c_sizes(layout) -> tuple:
    return tuple(ctypes.sizeof(t) for t in layout.types)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_the_compiled_kernel_matches_what_python_launches(spec, nvrtc_cubins):
    cubin, symbol = nvrtc_cubins[spec]
    info = elf.read_cubin(cubin)
    assert (info.machine, info.sm) == (elf.EM_CUDA, int(spec.arch[3:5]))
    assert info.entry_symbols == (symbol,)
    assert spec.cpp_instance().split("<")[0].split("::")[1] in symbol
    recorded = elf.kernel_info(cubin)
    family = kernels.family(spec.kernel)
    assert recorded.max_threads == (spec.num_threads, 1, 1)
    assert recorded.param_sizes == _c_sizes(family.ARGS)


@pytest.mark.parametrize("spec", EXTRA_SPECS, ids=_spec_id)
def test_nvcc_builds_the_same_kernel(spec, nvrtc_cubins):
    cubin, symbol = _compile(spec, "nvcc")
    assert symbol == nvrtc_cubins[spec][1]
    assert elf.kernel_info(cubin) == elf.kernel_info(nvrtc_cubins[spec][0], symbol)


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
    true_value = getattr(module, planned)
    monkeypatch.setattr(module, planned,
                        lambda s: (not true_value(s)) if planned == "uses_tma_store"
                        else true_value(s) + 8)
    with pytest.raises(compiler_module.CompileError, match="static assertion failed"):
        _compile(spec)


def test_the_register_budget_of_every_hopper_tile_is_asserted_by_the_header():
    text = (source.csrc_dir() / hopper_fp8.HEADER).read_text()
    assert "128 * kNumTMARegisters + kNumMathThreads * kNumMathRegisters <= 65536" in text
