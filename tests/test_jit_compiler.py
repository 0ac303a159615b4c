"""NVRTC and NVCC: both produce a real cubin for the spec's arch and find its kernel symbol."""
import pytest

from dgemm.heuristics import select
from dgemm.jit import compiler as compiler_module
from dgemm.jit import elf, source
from dgemm.jit.errors import CompileError

COMPILERS = ["nvrtc", "nvcc"]
HOPPER = select("fp8_gemm_nt", 128, 4096, 7168)
PORTABLE = select("fp8_gemm_nt", 128, 4096, 7168, arch="sm_80")


@pytest.fixture(scope="module")
def compiled(test_csrc):
    """(compiler name, arch) -> CompiledKernel of the test kernels, built once per module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DGEMM_CSRC_DIR", str(test_csrc))
        patch.delenv("DGEMM_JIT_DEBUG", raising=False)
        return {(name, spec.arch): compiler_module.get_compiler(name).compile(
                    spec, source.render(spec))
                for name in COMPILERS for spec in (HOPPER, PORTABLE)}


@pytest.mark.parametrize("name", COMPILERS)
def test_the_cubin_is_an_elf_for_nvidia_cuda(compiled, name):
    assert elf.read_cubin(compiled[(name, "sm_90a")].cubin).machine == elf.EM_CUDA == 190


@pytest.mark.parametrize("name", COMPILERS)
@pytest.mark.parametrize("arch, sm", [("sm_90a", 90), ("sm_80", 80)])
def test_the_cubin_targets_the_specs_sm(compiled, name, arch, sm):
    assert elf.read_cubin(compiled[(name, arch)].cubin).sm == sm


@pytest.mark.parametrize("name", COMPILERS)
def test_the_kernel_symbol_is_the_mangled_template_instance(compiled, name):
    symbol = compiled[(name, "sm_90a")].symbol
    assert symbol.startswith("_ZN5dgemm15fp8_gemm_kernelI") and "Lj4096ELj7168E" in symbol


def test_both_compilers_agree_on_the_kernel_symbol(compiled):
    assert compiled[("nvrtc", "sm_80")].symbol == compiled[("nvcc", "sm_80")].symbol


def test_nvrtc_reports_its_version_as_major_dot_minor():
    version = compiler_module.get_compiler("nvrtc").version
    assert version.count(".") == 1 and all(part.isdigit() for part in version.split("."))


def test_flags_carry_the_arch_and_no_absolute_paths(test_kernels):
    for name in COMPILERS:
        flags = compiler_module.get_compiler(name).flags(HOPPER)
        assert any("sm_90a" in flag for flag in flags)
        assert not any("/" in flag for flag in flags)


def test_debug_mode_adds_line_info_to_the_flags(monkeypatch):
    monkeypatch.setenv("DGEMM_JIT_DEBUG", "1")
    assert "-lineinfo" in compiler_module.get_compiler("nvrtc").flags(HOPPER)


@pytest.fixture
def broken_csrc(test_csrc, tmp_path, monkeypatch):
    import shutil
    broken = tmp_path / "csrc"
    shutil.copytree(test_csrc, broken)
    header = broken / "dgemm" / "fp8_gemm.cuh"
    header.write_text(header.read_text() + "\nthis is not C++;\n")
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(broken))
    return broken


@pytest.mark.parametrize("name", COMPILERS)
def test_a_compile_failure_raises_compile_error_with_log_and_spec(broken_csrc, name):
    with pytest.raises(CompileError) as raised:
        compiler_module.get_compiler(name).compile(HOPPER, source.render(HOPPER))
    assert "fp8_gemm.cuh" in raised.value.log and "error" in raised.value.log
    assert HOPPER.to_json() in str(raised.value) and raised.value.log in str(raised.value)
    assert raised.value.spec == HOPPER


def test_a_missing_nvcc_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DGEMM_NVCC", str(tmp_path / "no-nvcc"))
    with pytest.raises(CompileError, match="DGEMM_NVCC=.*not an executable"):
        compiler_module.get_compiler("nvcc")


def test_bytes_that_are_not_an_elf_are_rejected_by_the_symbol_reader():
    with pytest.raises(elf.ElfError, match="not an ELF"):
        elf.kernel_symbol(b"not a cubin at all")
