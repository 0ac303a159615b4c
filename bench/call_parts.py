"""Where a cached `fp8_gemm_nt` call's host time goes, part by part (M = 64).

    python -m bench.call_parts [--n 2112 --k 7168] [--cpu-stub]

Each line is the time of one part alone, issued ISSUE_CALLS times from an idle GPU and
divided (bench_call's "issue" method), best of several repeats: the whole call with d given
and with d=None; the key with its memo lookup (a key never seen: what every call pays before
its guard), the tensor guard (`dgemm.guards`) alone, the d=None allocation, the fast path's
run (checks + launch), the whole memoised path in Python (`gemm._cached`) and in C
(`dgemm/native`, when it loads), the launch plan's run alone (one ctypes cuLaunchKernelEx),
the same launch with the GIL held, and the torch queries the fast path makes. What the parts
do not add up to is Python's call overhead between them.

`--cpu-stub`: no GPU: CPU tensors and the recording stand-in for libcuda
(bench/stub_launch.py), so the parts are dgemm's Python path alone (the launch is a Python
method, the allocation the CPU allocator's): compare two versions of dgemm on one host with
it, not against GPU numbers. Without it, needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import time

import torch

import dgemm
from dgemm import gemm, native
from dgemm.jit import launcher

from .bench_call import ISSUE_CALLS
from .stub_launch import fp8_inputs, stubbed_launch

REPEATS = 7


def issue_us(fn, sync, repeats: int = REPEATS) -> float:
    """Best over `repeats` of ISSUE_CALLS back-to-back calls / ISSUE_CALLS, from an idle GPU."""
    best = float("inf")
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(ISSUE_CALLS):
            fn()
        best = min(best, (time.perf_counter() - start) / ISSUE_CALLS * 1e6)
    sync()
    return best


def parts(n: int, k: int, device: str) -> list:
    a, b, d = fp8_inputs(64, n, k, device=device)
    dgemm.fp8_gemm_nt(a, b, d)
    dgemm.fp8_gemm_nt(a, b)
    key, _ = gemm._cached("fp8_gemm_nt", a, b, d, None, None)
    fast = gemm._fast_calls[key][0]
    key_none, _ = gemm._cached("fp8_gemm_nt", a, b, None, None, None)
    fast_none = gemm._fast_calls[key_none][0]
    plan, pointers = fast.plan, fast.plan.pointers
    tensors = (a[0], a[1], b[0], b[1], d)
    a0 = a[0]
    common = [
        ("call, d given", lambda: dgemm.fp8_gemm_nt(a, b, d)),
        ("call, d=None", lambda: dgemm.fp8_gemm_nt(a, b)),
        ("key + memo lookup (d given)", lambda: gemm._cached("call_parts: unseen", a, b, d, None,
                                                             None)),
        ("tensor guard (5 tensors)", lambda: fast.matches(*tensors)),
        ("d=None allocation", lambda: torch.empty_like(fast_none.d_like)),
        ("fast path run (checks + launch)", lambda: fast.run(a[0], a[1], b[0], b[1], d, None)),
        ("Python memo + guard + run (gemm._cached)",
         lambda: gemm._cached("fp8_gemm_nt", a, b, d, None, None)),
    ]
    hot = native.hot_path()
    if hot is not None:
        common.append(("C memo + guard + run (dgemm/native)",
                       lambda: hot("fp8_gemm_nt", a, b, d, None, None)))
    if device == "cpu":
        return common + [("plan run (stand-in driver)", lambda: plan.run(pointers, 0)),
                         ("data_ptr", a0.data_ptr), ("empty lambda", lambda: None)]
    index = torch.cuda.current_device()
    stream = torch._C._cuda_getCurrentRawStream(index)
    lib = launcher.driver()
    # The same entry point without ctypes' GIL release around it (a PyDLL handle).
    unlocked = ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx
    unlocked.argtypes, unlocked.restype = lib.cuLaunchKernelEx.argtypes, ctypes.c_int
    plan.bind_stream(stream)
    extra = [("cuLaunchKernelEx, GIL held (PyDLL)",
              lambda: unlocked(plan.config_address, plan.function, plan.address, None))]
    return extra + common + [
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
    parser.add_argument("--cpu-stub", action="store_true",
                        help="no GPU: time dgemm's Python path against a stand-in driver")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    if args.cpu_stub:
        device, where, sync = "cpu", "CPU, driver stubbed (bench/stub_launch.py)", lambda: None
        context = stubbed_launch(record=False)
    elif not torch.cuda.is_available():
        print("bench.call_parts: needs a CUDA GPU (or --cpu-stub)")
        return 2
    else:
        device, where = "cuda", torch.cuda.get_device_properties(0).name
        sync, context = torch.cuda.synchronize, contextlib.nullcontext()
    print(f"host time of a cached fp8_gemm_nt call at 64x{args.n}x{args.k}, {where}, "
          f"us per call ({ISSUE_CALLS} issued, best of {args.repeats})")
    with context:
        for name, fn in parts(args.n, args.k, device):
            print(f"  {name:36s} {issue_us(fn, sync, args.repeats):7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
