"""`runtime.make_tma_desc` on CPU: what reaches libcuda's cuTensorMapEncodeTiled (a recording
stand-in for the driver) and how a driver error comes back. The encoded maps themselves are
checked on a GPU (tests/gpu/test_runtime.py loads through them)."""
import ctypes

import pytest
import torch

pytest.importorskip("cuda.bindings")

from dgemm.jit import launcher, runtime  # noqa: E402


class EncodeRecorder:
    def __init__(self, result=0):
        self.calls = []
        self.result = result

    def cuTensorMapEncodeTiled(self, out, dtype, rank, address, dims, strides, box, element,
                               interleave, swizzle, l2, oob):
        self.calls.append(dict(
            out=out, dtype=dtype, rank=rank, address=address, dims=list(dims[:rank]),
            strides=list(strides[:rank - 1]), box=list(box[:rank]),
            element=list(element[:rank]), interleave=interleave, swizzle=swizzle, l2=l2,
            oob=oob))
        ctypes.memset(out, 0xAB, 16)           # "encodes" into the caller's storage
        return self.result


@pytest.fixture
def recorder():
    saved = launcher._driver
    stand_in = EncodeRecorder()
    launcher.set_driver(stand_in)
    try:
        yield stand_in
    finally:
        launcher._driver = saved


def test_the_encode_gets_the_geometry_and_the_c_enum_values(recorder):
    desc = runtime.make_tma_desc(0x10000, torch.bfloat16, (4096, 64), (8192,), (64, 64), 128)
    call, = recorder.calls
    assert call["out"] == ctypes.addressof(desc) and ctypes.addressof(desc) % 64 == 0
    assert (call["rank"], call["address"], call["dims"], call["strides"], call["box"],
            call["element"]) == (2, 0x10000, [4096, 64], [8192], [64, 64], [1, 1])
    # cuda.h: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9, SWIZZLE_128B = 3, L2_PROMOTION_L2_256B = 3.
    assert (call["dtype"], call["interleave"], call["swizzle"], call["l2"], call["oob"]) == (
        9, 0, 3, 3, 0)
    assert bytes(desc)[:16] == b"\xab" * 16      # written in place, no copy of another map


def test_a_rank_one_map_passes_no_stride(recorder):
    runtime.make_tma_desc(0x10000, torch.float32, (256,), (), (32,))
    call, = recorder.calls
    assert call["rank"] == 1 and call["strides"] == [] and call["dtype"] == 7


def test_a_driver_error_raises_naming_the_call(recorder):
    recorder.result = 1                          # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(RuntimeError, match=r"cuTensorMapEncodeTiled"):
        runtime.make_tma_desc(0x10000, torch.uint8, (512, 64), (512,), (128, 64), 128)
