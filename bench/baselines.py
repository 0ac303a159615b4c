"""The implementations dgemm is timed against in the same run (docs/benchmarks.md)."""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from typing import Callable, List

import torch


def cublas_blockwise(a: tuple, b: tuple, m: int) -> Callable[[], torch.Tensor]:
    """cuBLAS's block-scaled FP8 GEMM ("cuBLAS-blk"): torch._scaled_mm with 1x128 A scales
    stored column-major and 128x128 B scales, for an (fp8, scales) pair `a` of M rows and `b`.
    Raises RuntimeError when cuBLAS refuses the shape (e.g. M not a multiple of 4) on the call."""
    a_fp8, a_scales = a
    b_fp8, b_scales = b
    sa = a_scales[:m].t().contiguous().t()           # (M, K/128), strides (1, M)
    return lambda: torch._scaled_mm(a_fp8, b_fp8.t(), scale_a=sa, scale_b=b_scales.t(),
                                    out_dtype=torch.bfloat16)


def cublas_blockwise_checked(a: tuple, b: tuple, m: int) -> tuple:
    """(the cuBLAS-blk call, its first output, None), or (None, None, the first line of
    cuBLAS's error) when it refuses the shape: a table keeps its other columns."""
    run = cublas_blockwise(a, b, m)
    try:
        return run, run(), None
    except RuntimeError as error:
        return None, None, str(error).splitlines()[0]


def deep_gemm_module():
    """DeepGEMM (the anchor, docs/benchmarks.md says how to build it on the GPU machine) when
    `import deep_gemm` works, else None: the benches then print no DeepGEMM column."""
    try:
        import deep_gemm
    except Exception:          # not built here, or its extension fails to load
        return None
    return deep_gemm


def deep_gemm_dense(deep_gemm, a: tuple, b: tuple, d: torch.Tensor) -> Callable[[], None]:
    """DeepGEMM's fp8_gemm_nt on the very pairs dgemm gets (A scales already MN-major and
    TMA-aligned, so no one times a layout copy), writing its own `d`."""
    return lambda: deep_gemm.fp8_gemm_nt(a, b, d)


def deep_gemm_contiguous(deep_gemm, a: tuple, b: tuple, d: torch.Tensor,
                         m_indices: torch.Tensor) -> Callable[[], None]:
    """DeepGEMM's contiguous grouped GEMM on dgemm's pairs and m_indices (-1 on padding rows)."""
    return lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices)


def deep_gemm_masked(deep_gemm, a: tuple, b: tuple, d: torch.Tensor, masked_m: torch.Tensor,
                     expected_m: int) -> Callable[[], None]:
    """DeepGEMM's masked grouped GEMM on dgemm's pairs, masked_m and expected_m."""
    return lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)


# --- compiling DeepGEMM's kernels before the timed rounds ------------------------------------------
# A job names one call by its shape: ("dense", m, n, k), ("contiguous", rows, n, k) with the valid
# rows of each group, ("masked", rows, max_m, expected_m, n, k); the weight gradients
# ("wgrad", m, n, k) and ("k_grouped", m, n, ks) with ks the tuple of each group's K. DeepGEMM
# picks its kernel from these alone, so a call on inputs of the same shape compiles the kernel
# the timed call will use.
def warm_deep_gemm(jobs: List[tuple], workers: int = 0) -> List[str]:
    """Run DeepGEMM once on each job in parallel worker processes, so that its NVCC JIT (2-6 s
    per kernel, one at a time in the calling process) is paid on every CPU before the timed
    rounds; the kernels land in DeepGEMM's disk cache, which this process then reads. Returns
    one message per job that failed (empty when all ran)."""
    jobs = list(dict.fromkeys(jobs))
    if not jobs:
        return []
    workers = min(len(jobs), workers or os.cpu_count() or 1)
    context = multiprocessing.get_context("spawn")     # no CUDA state inherited
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        return [error for error in pool.map(_warm_one, jobs) if error]


def warm_deep_gemm_reporting(jobs: List[tuple]) -> None:
    """`warm_deep_gemm`, then one line of how it went and the first few failures (each
    failed job only loses its DeepGEMM column)."""
    errors = warm_deep_gemm(jobs)
    print(f"DeepGEMM warmed up ({len(errors)} failed)", flush=True)
    for error in errors[:5]:
        print("  " + error, flush=True)


def _warm_one(job: tuple) -> str:
    try:
        import deep_gemm
        import dgemm
        _call(deep_gemm, dgemm, job)
        torch.cuda.synchronize()
        return ""
    except Exception as exc:                 # reported, never fatal: that shape loses its column
        return f"{job[:1] + tuple(j if not isinstance(j, tuple) else len(j) for j in job[1:])}: " \
               f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _call(deep_gemm, dgemm, job: tuple) -> None:
    """One DeepGEMM call of the job's shape on placeholder values (ones; only shapes matter)."""
    cuda = "cuda"

    def pair(*shape):
        return _fp8_ones(*shape), torch.ones(*shape[:-1], shape[-1] // 128, device=cuda)

    kind = job[0]
    if kind == "dense":
        m, n, k = job[1:]
        a, b = pair(m, k), pair(n, k)
        d = torch.empty(m, n, device=cuda, dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt((a[0], dgemm.get_mn_major_tma_aligned_tensor(a[1])),
                              _b_pair(b, n, k), d)
    elif kind == "contiguous":
        rows, n, k = job[1:]
        m_indices = contiguous_indices(rows)
        m = m_indices.numel()
        a = pair(m, k)
        b = _grouped_b(len(rows), n, k)
        d = torch.empty(m, n, device=cuda, dtype=torch.bfloat16)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
            (a[0], dgemm.get_mn_major_tma_aligned_tensor(a[1])), b, d, m_indices.to(cuda))
    elif kind == "masked":
        rows, max_m, expected_m, n, k = job[1:]
        groups = len(rows)
        a = pair(groups, max_m, k)
        b = _grouped_b(groups, n, k)
        d = torch.empty(groups, max_m, n, device=cuda, dtype=torch.bfloat16)
        masked_m = torch.tensor(rows, dtype=torch.int32, device=cuda)
        deep_gemm.m_grouped_fp8_gemm_nt_masked(
            (a[0], dgemm.get_mn_major_tma_aligned_tensor(a[1])), b, d, masked_m, expected_m)
    elif kind == "wgrad":                   # fp8_gemm_nt(recipe=(1, 1, 128)), fp32 d is c
        m, n, k = job[1:]
        a, b = pair(m, k), pair(n, k)
        d = torch.zeros(m, n, device=cuda)
        deep_gemm.fp8_gemm_nt((a[0], dgemm.get_mn_major_tma_aligned_tensor(a[1])),
                              (b[0], dgemm.get_mn_major_tma_aligned_tensor(b[1])), d, c=d,
                              recipe=(1, 1, 128))
    elif kind == "k_grouped":               # ("k_grouped", m, n, ks): the host list of K_g
        m, n, ks = job[1], job[2], list(job[3])
        total = sum(ks)
        sa = torch.ones(m, total // 128, device=cuda)
        sb = torch.ones(n, total // 128, device=cuda)
        d = torch.zeros(len(ks), m, n, device=cuda)
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
            (_fp8_ones(total * m), dgemm.get_mn_major_tma_aligned_tensor(sa)),
            (_fp8_ones(total * n), dgemm.get_mn_major_tma_aligned_tensor(sb)), d, ks,
            torch.tensor(ks, dtype=torch.int32, device=cuda), c=d)
    else:
        raise ValueError(f"unknown DeepGEMM warm-up job kind {kind!r}")


def _b_pair(b: tuple, n: int, k: int) -> tuple:
    """B with its 128x128 block scales [ceil(n/128), k/128] (the pair() helper made per-row)."""
    return b[0], torch.ones((n + 127) // 128, k // 128, device="cuda")


def _grouped_b(groups: int, n: int, k: int) -> tuple:
    return _fp8_ones(groups, n, k), torch.ones(groups, (n + 127) // 128, k // 128, device="cuda")


def _fp8_ones(*shape) -> torch.Tensor:
    """float8_e4m3fn ones (bit pattern 0x38), one byte per element on the way (no fp32 copy)."""
    return torch.full(shape, 0x38, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)


def contiguous_indices(rows) -> torch.Tensor:
    """m_indices (CPU, int32) of the contiguous layout: group g's rows, then -1 up to the next
    multiple of 128 rows; at least 128 rows. bench.inputs.random_contiguous lays rows out the
    same way."""
    alignment = 128
    padded = [-(-r // alignment) * alignment for r in rows]
    m_indices = torch.full((max(sum(padded), alignment),), -1, dtype=torch.int32)
    start = 0
    for g, (r, size) in enumerate(zip(rows, padded)):
        m_indices[start:start + r] = g
        start += size
    return m_indices
