"""dgemm: JIT-compiled FP8 GEMMs for NVIDIA GPUs (Hopper sm_90a kernel, portable sm_80+ kernel)
with a kernel cache shared across a cluster. Importing needs neither a GPU nor libcuda.

The public names below are imported on first use (PEP 562), so `import dgemm` and the
`dgemm-cache` command (whose `--help` and `--version` must answer at once) do not pay for
importing torch; `dgemm.fp8_gemm_nt`, `from dgemm import fp8_gemm_nt` and `from dgemm import *`
work as if they had been imported eagerly.
"""
import importlib

from ._version import __version__

# public name -> the submodule that defines it
_EXPORTS = {
    "fp8_gemm_nt": "gemm", "m_grouped_fp8_gemm_nt_contiguous": "gemm",
    "m_grouped_fp8_gemm_nt_masked": "gemm", "get_mk_alignment_for_contiguous_layout": "gemm",
    "per_token_cast_to_fp8": "utils", "per_block_cast_to_fp8": "utils",
    "get_mn_major_tma_aligned_tensor": "utils", "set_num_sms": "utils",
    "get_num_sms": "utils", "ceil_div": "utils", "calc_diff": "utils",
    "warmup": "warm",
    "k_grouped_fp8_gemm_nt_contiguous": "wgrad",
    "FP8Linear": "training", "fp8_linear": "training", "FP8Experts": "training",
}
# Submodules that `import dgemm` used to load as a side effect; still reachable as attributes.
_SUBMODULES = ("jit", "gemm", "utils", "heuristics", "kernels", "ops", "warm", "compat")

__all__ = [*_EXPORTS, "jit", "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value         # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))
