"""The stand-in kernels of tests/data/csrc keep the real kernels' signatures.

The JIT tests compile stand-ins (a trivial body, milliseconds per compile) in place of the real
headers; they only test what they claim if a stand-in is the same kernel to the outside: the
same template parameters and run-time parameters (one mangled symbol), the same threads per
block and parameter block. Compared on the compiled cubins, not on the text.
"""
import pytest

from dgemm.heuristics import select
from dgemm.jit import compiler as compiler_module
from dgemm.jit import elf, source

SPECS = [select("m_grouped_fp8_gemm_nt_masked", 64, 4096, 7168, num_groups=2),
         select("fp8_gemm_nt", 128, 4096, 7168, arch="sm_80")]


def _info(spec) -> elf.KernelInfo:
    compiled = compiler_module.get_compiler("nvrtc").compile(spec, source.render(spec))
    return elf.kernel_info(compiled.cubin, compiled.symbol)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kernel)
def test_the_stand_in_has_the_real_kernels_symbol_threads_and_parameters(spec, test_csrc,
                                                                          monkeypatch):
    real = _info(spec)
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(test_csrc))
    stand_in = _info(spec)
    assert stand_in == real
