"""The real kernels in csrc/ compile to cubins for their arch with both compilers (CPU only).

Kept apart from the JIT tests (which use trivial stand-in kernels) so that a broken kernel header
fails here, by name, without hiding whether the JIT machinery itself works.
"""
import pytest

from dgemm.heuristics import KINDS, select
from dgemm.jit import compiler as compiler_module
from dgemm.jit import elf, source

# Distinct specs only: the portable kernel's spec does not depend on M.
SPECS = list(dict.fromkeys(
    [select(kind, m, 4096, 7168, num_groups=4 if "grouped" in kind else 1, arch=arch)
     for arch in ("sm_90a", "sm_80") for kind in KINDS for m in (128, 4096)]
    # Three warpgroups in clusters sharing A (the 4096-row pick for N = 2112).
    + [select("fp8_gemm_nt", 4096, 2112, 7168)]))
COMPILERS = ("nvrtc", "nvcc")


@pytest.mark.parametrize("name", COMPILERS)
@pytest.mark.parametrize("spec", SPECS,
                         ids=lambda s: f"{s.arch}-{s.gemm_type}-{s.block_m}x{s.block_n}")
def test_the_real_kernel_compiles_to_a_cubin_for_its_arch(spec, name):
    compiled = compiler_module.get_compiler(name).compile(spec, source.render(spec))
    info = elf.read_cubin(compiled.cubin)
    assert (info.machine, info.sm) == (elf.EM_CUDA, int(spec.arch[3:5]))
    assert info.entry_symbols == (compiled.symbol,)
    assert spec.cpp_instance().split("<")[0].split("::")[1] in compiled.symbol


def test_the_large_m_picks_include_the_two_wave_and_three_warpgroup_tiles_and_both_clusters():
    tiles = {(s.block_m, s.block_n, s.num_tma_multicast, s.multicast_on_a)
             for s in SPECS if s.arch == "sm_90a"}
    assert {(128, 256, 1, False), (128, 256, 2, False), (192, 128, 2, True)} <= tiles
    # K blocks that do not fill whole laps of the ring: the rotating walk is compiled too.
    assert any(s.k // 128 % s.num_stages for s in SPECS if s.arch == "sm_90a")
