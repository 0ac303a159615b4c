"""Cubin -> loaded kernel -> launch on torch's current stream, through cuda-python's driver API.

`load_cubin` loads a cubin into a device's primary context once and sets its shared-memory
attribute; `LoadedKernel.launch(grid, args)` launches `ArgLayout`-packed arguments through
`dgemm.jit.launcher` (one ctypes call into libcuda: cuLaunchKernel, or cuLaunchKernelEx with
a per-call copy of the kernel's prebuilt cluster config); the GEMMs' hot path skips the packing too, with launch
plans (`dgemm.kernels.plans`). This module never looks for cubins: the layer above
(`dgemm.kernels.loader`) walks the cache and hands them in. Every CUresult is checked; a
failure raises RuntimeError naming the call.
"""
from __future__ import annotations

import ctypes
from typing import Optional, Sequence, Tuple

import torch
from cuda.bindings import driver

from . import launcher, state
from .args import ArgLayout, PackedArgs, TmaDescriptor  # noqa: F401  (re-exported)

_SUCCESS = driver.CUresult.CUDA_SUCCESS


# --- errors ------------------------------------------------------------------------------------
def error_text(err) -> str:
    try:
        name_err, name = driver.cuGetErrorName(err)
        str_err, text = driver.cuGetErrorString(err)
        if name_err == _SUCCESS and str_err == _SUCCESS:
            return f"{name.decode()} ({text.decode()})"
    except Exception:   # the error itself may be "no driver": keep the original code visible
        pass
    return str(err)


def check(result, call: str):
    """Unwrap a cuda-python `(CUresult, *values)` tuple; raise RuntimeError naming `call`."""
    err = result[0]
    if err != _SUCCESS:
        raise RuntimeError(f"{call} failed: {error_text(err)}")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


# --- context ------------------------------------------------------------------------------------
_driver_ready = state.Value("runtime.driver_initialised", False)


def _ensure_context(device_index: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    if not _driver_ready.get():
        check(driver.cuInit(0), "cuInit")
        _driver_ready.set(True)
    torch.cuda.init()
    device = check(driver.cuDeviceGet(device_index), "cuDeviceGet")
    current = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    primary = check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    # Retain keeps the context alive for the process; the module lives as long.
    if int(current) != int(primary):
        check(driver.cuCtxSetCurrent(primary), "cuCtxSetCurrent")


# --- TMA descriptors ----------------------------------------------------------------------------
_E = driver.CUtensorMapDataType
# The C enums' values (ints: the ctypes encode in `make_tma_desc` takes them as such).
_TMA_DTYPES = {
    torch.float8_e4m3fn: int(_E.CU_TENSOR_MAP_DATA_TYPE_UINT8),
    torch.uint8: int(_E.CU_TENSOR_MAP_DATA_TYPE_UINT8),
    torch.bfloat16: int(_E.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16),
    torch.float16: int(_E.CU_TENSOR_MAP_DATA_TYPE_FLOAT16),
    torch.float32: int(_E.CU_TENSOR_MAP_DATA_TYPE_FLOAT32),
    torch.int32: int(_E.CU_TENSOR_MAP_DATA_TYPE_INT32),
}
_TMA_SWIZZLES = {
    0: int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE),
    32: int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B),
    64: int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B),
    128: int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B),
}
_INTERLEAVE_NONE = int(driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE)
_L2_PROMOTION_256B = int(driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
_OOB_FILL_NONE = int(driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


def make_tma_desc(tensor_ptr: int, dtype: torch.dtype, global_dims: Sequence[int],
                  global_strides: Sequence[int], box_dims: Sequence[int],
                  swizzle: int = 0) -> TmaDescriptor:
    """Encode a tiled TMA descriptor (cuTensorMapEncodeTiled).

    Arguments:
        tensor_ptr: device address of element (0, ..., 0); 16-byte aligned.
        dtype: element type (float8_e4m3fn, bfloat16, float16, float32, int32, uint8).
        global_dims: sizes, innermost (contiguous) dimension first.
        global_strides: byte strides of the outer dimensions (len(global_dims) - 1 values),
            each a multiple of 16.
        box_dims: tile size loaded per TMA op, innermost first (each 1..256).
        swizzle: 0, 32, 64 or 128 (bytes); with swizzle the inner box row must fit in it.
    Returns:
        a `TmaDescriptor` (128 bytes, 64-byte aligned), usable as an `ArgLayout` value.
    """
    if dtype not in _TMA_DTYPES:
        raise TypeError(f"make_tma_desc: dtype must be one of "
                        f"{', '.join(str(t) for t in _TMA_DTYPES)}; got {dtype}")
    if swizzle not in _TMA_SWIZZLES:
        raise ValueError(f"make_tma_desc: swizzle must be 0, 32, 64 or 128 bytes; got {swizzle!r}")
    rank = len(global_dims)
    if not 1 <= rank <= 5 or len(box_dims) != rank or len(global_strides) != rank - 1:
        raise ValueError(f"make_tma_desc: need 1..5 global dims, as many box dims and one "
                         f"stride fewer; got dims {list(global_dims)}, strides "
                         f"{list(global_strides)}, box {list(box_dims)}")
    if tensor_ptr % 16 != 0:
        raise ValueError(f"make_tma_desc: the global address must be 16-byte aligned; got "
                         f"{tensor_ptr:#x}")
    if any(s % 16 != 0 for s in global_strides):
        raise ValueError(f"make_tma_desc: global strides must be multiples of 16 bytes; got "
                         f"{list(global_strides)}")
    if any(not 1 <= b <= 256 for b in box_dims):
        raise ValueError(f"make_tma_desc: box dims must be in 1..256; got {list(box_dims)}")
    element_size = dtype.itemsize
    if swizzle and box_dims[0] * element_size > swizzle:
        raise ValueError(f"make_tma_desc: the inner box row ({box_dims[0]} x {element_size} B) "
                         f"must fit the {swizzle}-byte swizzle")

    desc = launcher.aligned_descriptor()
    u64, u32 = ctypes.c_uint64 * rank, ctypes.c_uint32 * rank
    err = launcher.driver().cuTensorMapEncodeTiled(
        ctypes.addressof(desc), _TMA_DTYPES[dtype], rank, tensor_ptr,
        u64(*global_dims), (ctypes.c_uint64 * max(1, rank - 1))(*global_strides),
        u32(*box_dims), u32(*([1] * rank)), _INTERLEAVE_NONE, _TMA_SWIZZLES[swizzle],
        _L2_PROMOTION_256B, _OOB_FILL_NONE)
    if err:
        check((driver.CUresult(err),), "cuTensorMapEncodeTiled")
    return desc


# --- loaded kernels -----------------------------------------------------------------------------
def _current_stream(device_index: int) -> int:
    try:
        return torch._C._cuda_getCurrentRawStream(device_index)   # ~10x cheaper than the object
    except AttributeError:
        return torch.cuda.current_stream(device_index).cuda_stream


class LoadedKernel:
    """A kernel function in one device's primary context, its smem attribute already set.
    `handle`: the CUfunction as an int, what `dgemm.jit.launcher` passes to libcuda;
    `cluster_config`: the launch config with the cluster attribute (None without clusters)."""
    __slots__ = ("function", "module", "symbol", "num_threads", "smem_bytes", "cluster_dim",
                 "device_index", "handle", "cluster_config")

    def __init__(self, module, function, symbol: str, num_threads: int, smem_bytes: int,
                 cluster_dim: int, device_index: int):
        self.module = module
        self.function = function
        self.symbol = symbol
        self.num_threads = num_threads
        self.smem_bytes = smem_bytes
        self.cluster_dim = cluster_dim
        self.device_index = device_index
        self.handle = int(function)
        self.cluster_config = (launcher.cluster_config(num_threads, smem_bytes, cluster_dim)
                               if cluster_dim > 1 else None)

    def launch(self, grid: Tuple[int, int, int], args: PackedArgs,
               stream: Optional[int] = None) -> None:
        """Launch on `stream` (default: torch's current stream of the kernel's device)."""
        if stream is None:
            stream = _current_stream(self.device_index)
        what = self.symbol if self.cluster_dim == 1 else (f"{self.symbol}, cluster "
                                                          f"{self.cluster_dim}")
        launcher.launch_packed(self.handle, grid, self.num_threads, self.smem_bytes,
                               self.cluster_config, args.address, stream, what)


def load_cubin(cubin: bytes, symbol: str, num_threads: int, smem_bytes: int = 0,
               cluster_dim: int = 1, device_index: Optional[int] = None) -> LoadedKernel:
    """Load `cubin` into the device's primary context and look up `symbol` (uncached)."""
    if device_index is None:
        device_index = torch.cuda.current_device()
    with torch.cuda.device(device_index):
        _ensure_context(device_index)
        module = check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
        function = check(driver.cuModuleGetFunction(module, symbol.encode()),
                         f"cuModuleGetFunction({symbol})")
        # Once at load, never per call: above 48 KiB the kernel must opt in.
        check(driver.cuFuncSetAttribute(
            function, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem_bytes), f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={smem_bytes})")
    return LoadedKernel(module, function, symbol, num_threads, smem_bytes, cluster_dim,
                        device_index)
