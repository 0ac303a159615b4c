"""Where a cached `fp8_gemm_nt` call's host time goes, part by part, on a GPU (M = 64).

    python -m bench.call_parts [--n 2112 --k 7168]

Each line is the time of one part alone, issued ISSUE_CALLS times from an idle GPU and
divided (bench_call's "issue" method), best of several repeats: the whole call with d given
and with d=None, the signature and its memo lookup, the d=None allocation, the fast path's run
(checks + launch), the launch plan's run alone (one ctypes cuLaunchKernelEx), the same launch
through cuLaunchKernel and with the GIL held, and the torch queries the fast path makes. What the parts do not add up to is Python's call overhead between
them. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import ctypes
import time

import torch

import dgemm
from dgemm import gemm
from dgemm.jit import launcher

from .bench_call import ISSUE_CALLS
from .stub_launch import fp8_inputs

REPEATS = 7


def issue_us(fn) -> float:
    """Best over REPEATS of ISSUE_CALLS back-to-back calls / ISSUE_CALLS, from an idle GPU."""
    best = float("inf")
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(ISSUE_CALLS):
            fn()
        best = min(best, (time.perf_counter() - start) / ISSUE_CALLS * 1e6)
    torch.cuda.synchronize()
    return best


def parts(n: int, k: int) -> list:
    a, b, d = fp8_inputs(64, n, k, device="cuda")
    dgemm.fp8_gemm_nt(a, b, d)
    dgemm.fp8_gemm_nt(a, b)
    sig_d = gemm._call_signature("fp8_gemm_nt", a, b, d, None, None)
    sig_none = gemm._call_signature("fp8_gemm_nt", a, b, None, None, None)
    fast, fast_none = gemm._fast_calls[sig_d], gemm._fast_calls[sig_none]
    plan, index = fast.plan, torch.cuda.current_device()
    pointers = plan.pointers
    stream = torch._C._cuda_getCurrentRawStream(index)
    a0 = a[0]
    lib = launcher.driver()
    grid, block = plan.grid, plan.block

    def classic_launch():          # the same kernel and parameters through cuLaunchKernel
        lib.cuLaunchKernel(plan.function, *grid, *block, plan.smem_bytes, stream, plan.address,
                           None)

    # The same entry point without ctypes' GIL release around it (a PyDLL handle).
    unlocked = ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx
    unlocked.argtypes, unlocked.restype = lib.cuLaunchKernelEx.argtypes, ctypes.c_int
    plan.config.stream = stream
    extra = [("cuLaunchKernel (no cluster attribute)", classic_launch)] if (
        plan.cluster_dim == 1) else []
    extra.append(("cuLaunchKernelEx, GIL held (PyDLL)",
                  lambda: unlocked(plan.config_address, plan.function, plan.address, None)))
    return extra + [
        ("call, d given", lambda: dgemm.fp8_gemm_nt(a, b, d)),
        ("call, d=None", lambda: dgemm.fp8_gemm_nt(a, b)),
        ("signature (d given)", lambda: gemm._call_signature("fp8_gemm_nt", a, b, d, None,
                                                             None)),
        ("memo lookup", lambda: gemm._fast_calls.get(sig_d)),
        ("d=None allocation", lambda: fast_none.new_d(fast_none.d_shape, fast_none.d_strides)),
        ("fast path run (checks + launch)", lambda: fast.run(a[0], a[1], b[0], b[1], d, None)),
        ("plan run (cuLaunchKernelEx)", lambda: plan.run(pointers, stream)),
        ("current device", torch._C._cuda_getDevice),
        ("current raw stream", lambda: torch._C._cuda_getCurrentRawStream(index)),
        ("data_ptr", a0.data_ptr),
        ("empty lambda", lambda: None),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2112)
    parser.add_argument("--k", type=int, default=7168)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench.call_parts: needs a CUDA GPU")
        return 2
    props = torch.cuda.get_device_properties(0)
    print(f"host time of a cached fp8_gemm_nt call at 64x{args.n}x{args.k}, {props.name}, "
          f"us per call ({ISSUE_CALLS} issued, best of {REPEATS})")
    for name, fn in parts(args.n, args.k):
        print(f"  {name:34s} {issue_us(fn):7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
