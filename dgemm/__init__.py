"""dgemm: JIT-compiled FP8 GEMMs for NVIDIA GPUs (Hopper sm_90a kernel, portable sm_80+ kernel)
with a kernel cache shared across a cluster. Importing needs neither a GPU nor libcuda."""
from . import jit
from .gemm import (fp8_gemm_nt, get_mk_alignment_for_contiguous_layout,
                   m_grouped_fp8_gemm_nt_contiguous, m_grouped_fp8_gemm_nt_masked)
from .utils import (calc_diff, ceil_div, get_mn_major_tma_aligned_tensor, get_num_sms,
                    per_block_cast_to_fp8, per_token_cast_to_fp8, set_num_sms)

__all__ = [
    "fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "get_mk_alignment_for_contiguous_layout", "per_token_cast_to_fp8", "per_block_cast_to_fp8",
    "get_mn_major_tma_aligned_tensor", "set_num_sms", "get_num_sms", "ceil_div", "calc_diff",
    "jit",
]
