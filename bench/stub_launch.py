"""dgemm's launch path on a GPU-free host: every call runs validation, selection, the launch
plan and the ctypes launch, with the driver replaced by a recorder. For measuring the host
path on CPU (`python -m bench.bench_call --cpu-stub`) and for testing what reaches the driver
(tests/test_launch_plans.py).

    with stubbed_launch() as driver:
        dgemm.fp8_gemm_nt(a, b, d)          # CPU tensors stand in for CUDA ones
        driver.launches[-1]                 # Launch(function, grid, block, smem, stream, params)

Stand-ins: CPU tensors are accepted as the device (`gemm._DEVICE_TYPE`), device "index None"
is an sm_90a GPU with 132 SMs, kernels are `StubKernel`s (no compile, no load), TMA descriptors
are encoded by `encode_descriptor` into a readable layout (`decode_descriptor`), and libcuda's
three launch-path entry points record what they get. With `record=False` (timing) the launch
and the descriptor re-pointing are C functions that only count (`CountingDriver`), reached
through ctypes or by address as libcuda's are. What is not measured: the driver's own launch
work (~3..4 us on an H200 host).
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import itertools
from typing import List, Optional

import torch

from dgemm import gemm, native, utils
from dgemm.jit import launcher, runtime
from dgemm.jit.args import TmaDescriptor
from dgemm.kernels import loader

NUM_SMS = 132


@dataclasses.dataclass
class Launch:
    function: int
    grid: tuple
    block: tuple
    smem_bytes: int
    stream: int
    cluster: int
    params: list                 # decoded: ints for pointer/scalar params, dicts for TMA maps


class StubKernel:
    """What `runtime.LoadedKernel` offers the launch path, without a GPU."""
    _handles = itertools.count(0x1000)

    def __init__(self, spec, device_index=None):
        self.spec = spec
        self.symbol = f"stub<{spec.kernel},{spec.block_m}x{spec.block_n}>"
        self.num_threads = spec.num_threads
        self.smem_bytes = spec.smem_bytes
        self.cluster_dim = spec.cluster_dim
        self.device_index = device_index
        self.handle = next(self._handles)
        self.cluster_config = (launcher.cluster_config(self.num_threads, self.smem_bytes,
                                                       self.cluster_dim)
                               if self.cluster_dim > 1 else None)


class _Encoded(ctypes.Structure):
    """The stand-in descriptor's layout inside the 128 bytes."""
    _fields_ = [("address", ctypes.c_uint64), ("rank", ctypes.c_uint64),
                ("dims", ctypes.c_uint64 * 5), ("strides", ctypes.c_uint64 * 4),
                ("box", ctypes.c_uint32 * 5), ("swizzle", ctypes.c_uint32)]


def encode_descriptor(tensor_ptr, dtype, global_dims, global_strides, box_dims, swizzle=0):
    """Stand-in for `runtime.make_tma_desc`: the same checks a caller relies on (16-byte
    alignment), and the geometry written where `decode_descriptor` reads it."""
    if tensor_ptr % 16:
        raise ValueError(f"make_tma_desc: the global address must be 16-byte aligned; got "
                         f"{tensor_ptr:#x}")
    desc = launcher.aligned_descriptor()
    enc = _Encoded.from_buffer(desc)
    enc.address, enc.rank, enc.swizzle = tensor_ptr, len(global_dims), swizzle
    for i, v in enumerate(global_dims):
        enc.dims[i] = v
    for i, v in enumerate(global_strides):
        enc.strides[i] = v
    for i, v in enumerate(box_dims):
        enc.box[i] = v
    return desc


def decode_descriptor(address: int) -> dict:
    enc = _Encoded.from_address(address)
    rank = enc.rank
    return {"address": enc.address, "dims": tuple(enc.dims[:rank]),
            "strides": tuple(enc.strides[:rank - 1]), "box": tuple(enc.box[:rank]),
            "swizzle": enc.swizzle}


class RecordingDriver:
    """libcuda's launch-path entry points, recording. `record=False`: count only (timing)."""

    def __init__(self, types_for, record: bool = True):
        self.launches: List[Launch] = []
        self.count = 0
        self.replaced = 0
        self._types_for = types_for
        self._record = record

    def _params(self, function, address):
        try:
            types = self._types_for(function)
        except KeyError:            # a kernel the stub did not hand out: raw pointers only
            return None
        pointers = (ctypes.c_void_p * len(types)).from_address(address)
        out = []
        for t, p in zip(types, pointers):
            if t is TmaDescriptor:
                out.append(decode_descriptor(p))
            else:
                out.append(t.from_address(p).value)
        return out

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.count += 1
        if self._record:
            self.launches.append(Launch(f, (gx, gy, gz), (bx, by, bz), smem, stream, 1,
                                        self._params(f, params)))
        return 0

    def cuLaunchKernelEx(self, config_address, f, params, extra):
        self.count += 1
        if self._record:
            c = launcher.LaunchConfig.from_address(config_address)
            self.launches.append(Launch(
                f, (c.grid_x, c.grid_y, c.grid_z), (c.block_x, c.block_y, c.block_z),
                c.shared_mem_bytes, c.stream or 0,
                c.attrs.contents.cluster_x if c.num_attrs else 1,
                self._params(f, params)))
        return 0

    def cuTensorMapReplaceAddress(self, desc_address, pointer):
        self.replaced += 1
        if pointer % 16:
            return 1                             # CUDA_ERROR_INVALID_VALUE
        _Encoded.from_address(desc_address).address = pointer
        return 0


class CountingDriver(RecordingDriver):
    """For timing: libcuda's two per-call entry points are C functions that only count
    (`dgemm.native`'s `null_driver`), reached the way libcuda's are: through ctypes from the
    Python path, by address from the C hot path, so neither pays a Python callback. Other
    entry points record nothing, as `RecordingDriver(record=False)`."""

    def __init__(self, types_for):
        super().__init__(types_for, record=False)
        module = native.module_for_stubs()
        launch, replace = module.null_driver()
        self.cuLaunchKernelEx = launcher._LAUNCH_EX(launch)
        self.cuTensorMapReplaceAddress = launcher._REPLACE_ADDRESS(replace)


@contextlib.contextmanager
def stubbed_launch(record: bool = True, device_type: str = "cpu"):
    """Within the block dgemm's GEMMs take CPU tensors and launch into a `RecordingDriver`."""
    kernels = {}

    def get_kernel(spec, device_index=None, fingerprint=None):
        key = (spec, device_index)
        if key not in kernels:
            kernels[key] = StubKernel(spec, device_index)
        return kernels[key]

    def types_for(handle):
        for kernel in kernels.values():
            if kernel.handle == handle:
                return kernel.spec.family.ARGS.types
        raise KeyError(handle)

    driver = RecordingDriver(types_for, record)
    if not record:
        try:
            driver = CountingDriver(types_for)
        except (OSError, ImportError) as exc:      # no C compiler: Python no-ops
            print(f"stub_launch: no C stand-in driver ({exc}); timing Python no-ops")
    saved = (gemm._DEVICE_TYPE, loader.get_kernel, runtime.make_tma_desc, loader._raw_stream,
             launcher._driver, torch.cuda.is_current_stream_capturing)
    torch.cuda.is_current_stream_capturing = lambda: False
    gemm._DEVICE_TYPE = device_type
    gemm._device_archs[None] = "sm_90a"
    utils._device_sms[None] = NUM_SMS
    loader.get_kernel = get_kernel
    runtime.make_tma_desc = encode_descriptor
    loader._raw_stream = lambda index: 0
    launcher.set_driver(driver)
    try:
        yield driver
    finally:
        (gemm._DEVICE_TYPE, loader.get_kernel, runtime.make_tma_desc, loader._raw_stream,
         launcher._driver, torch.cuda.is_current_stream_capturing) = saved
        gemm._device_archs.pop(None, None)
        utils._device_sms.pop(None, None)
        from dgemm.jit import state
        state.reset()       # plans, descriptors and ready kernels of stub kernels go too


def fp8_inputs(m: int, n: int, k: int, row_major_scales: bool = False, device: Optional[str]
               = None):
    """Zero-filled dgemm inputs of one dense call (values do not matter to the host path)."""
    a = torch.zeros((m, k), dtype=torch.float8_e4m3fn, device=device)
    sa = torch.ones((m, k // 128), dtype=torch.float32, device=device)
    if not row_major_scales:
        sa = utils.get_mn_major_tma_aligned_tensor(sa)
    b = torch.zeros((n, k), dtype=torch.float8_e4m3fn, device=device)
    sb = torch.ones((utils.ceil_div(n, 128), k // 128), dtype=torch.float32, device=device)
    d = torch.empty((m, n), dtype=torch.bfloat16, device=device)
    return (a, sa), (b, sb), d
