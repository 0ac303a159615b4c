"""dgemm.utils on CPU tensors: casts, scale layout, SM count, the accuracy metric."""
import pytest
import torch

import dgemm
from dgemm import utils
from dgemm.jit import state


@pytest.fixture(autouse=True)
def forget_num_sms():
    state.reset()
    yield
    state.reset()


def test_ceil_div_rounds_up():
    assert [dgemm.ceil_div(x, 128) for x in (0, 1, 128, 129)] == [0, 1, 1, 2]


def test_per_token_cast_round_trips_within_fp8_precision():
    torch.manual_seed(0)
    x = torch.randn(16, 512, dtype=torch.bfloat16)
    x_fp8, scales = dgemm.per_token_cast_to_fp8(x)
    restored = (x_fp8.float().view(16, 4, 128) * scales.unsqueeze(2)).view(16, 512)
    assert x_fp8.dtype == torch.float8_e4m3fn and scales.shape == (16, 4)
    assert dgemm.calc_diff(restored, x.float()) < 1e-3


def test_per_token_cast_maps_each_block_amax_to_448():
    x = torch.zeros(1, 256)
    x[0, 5], x[0, 200] = -3.0, 0.5
    x_fp8, scales = dgemm.per_token_cast_to_fp8(x)
    assert x_fp8.float()[0, 5] == -448 and x_fp8.float()[0, 200] == 448
    assert torch.allclose(scales, torch.tensor([[3.0 / 448, 0.5 / 448]]))


def test_per_token_cast_rejects_k_that_is_not_a_multiple_of_128():
    with pytest.raises(ValueError, match=r"k must be a multiple of 128"):
        dgemm.per_token_cast_to_fp8(torch.randn(4, 100))


def test_per_token_cast_rejects_integer_input():
    with pytest.raises(TypeError, match=r"bfloat16, float16 or float32"):
        dgemm.per_token_cast_to_fp8(torch.ones(4, 128, dtype=torch.int32))


def test_per_block_cast_gives_one_scale_per_128_by_128_block_and_keeps_the_shape():
    torch.manual_seed(0)
    x = torch.randn(200, 300)
    x_fp8, scales = dgemm.per_block_cast_to_fp8(x)
    assert x_fp8.shape == (200, 300) and scales.shape == (2, 3)
    expanded = scales.repeat_interleave(128, 0).repeat_interleave(128, 1)[:200, :300]
    assert dgemm.calc_diff(x_fp8.float() * expanded, x) < 1e-3


def test_mn_major_layout_of_a_2d_tensor_has_column_stride_aligned_to_4():
    x = torch.arange(10 * 3, dtype=torch.float32).view(10, 3)
    y = dgemm.get_mn_major_tma_aligned_tensor(x)
    assert y.shape == (10, 3) and y.stride() == (1, 12) and torch.equal(x, y)


def test_mn_major_layout_of_a_3d_tensor_is_per_group():
    x = torch.randn(2, 5, 3)
    y = dgemm.get_mn_major_tma_aligned_tensor(x)
    assert y.stride() == (3 * 8, 1, 8) and torch.equal(x, y)


def test_mn_major_layout_does_not_copy_a_tensor_already_in_that_layout():
    x = dgemm.get_mn_major_tma_aligned_tensor(torch.randn(10, 3))
    assert dgemm.get_mn_major_tma_aligned_tensor(x) is x


def test_mn_major_layout_rejects_a_1d_tensor():
    with pytest.raises(ValueError, match=r"2-D .* or 3-D"):
        dgemm.get_mn_major_tma_aligned_tensor(torch.randn(8))


def test_set_num_sms_overrides_get_num_sms(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    dgemm.set_num_sms(100)
    assert dgemm.get_num_sms() == 100


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_set_num_sms_rejects_anything_but_a_positive_int(bad):
    with pytest.raises(ValueError, match=r"num_sms must be a positive int"):
        dgemm.set_num_sms(bad)


def test_get_num_sms_without_a_gpu_says_how_to_set_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"set_num_sms"):
        dgemm.get_num_sms()


def test_calc_diff_is_zero_for_equal_tensors_and_one_for_opposite():
    x = torch.randn(64, 64)
    assert dgemm.calc_diff(x, x) == pytest.approx(0.0, abs=1e-12)
    assert dgemm.calc_diff(x, -x) == pytest.approx(2.0)


def test_calc_diff_grows_with_noise():
    torch.manual_seed(0)
    x = torch.randn(256, 256)
    small = dgemm.calc_diff(x, x + 1e-3 * torch.randn_like(x))
    large = dgemm.calc_diff(x, x + 1e-1 * torch.randn_like(x))
    assert 0 < small < 1e-5 < large


def test_hopper_compiles_for_sm_90a_and_other_gpus_for_their_own_arch():
    assert utils.arch_for_capability(9, 0) == "sm_90a"
    assert [utils.arch_for_capability(*c) for c in ((8, 0), (8, 9), (10, 0))] == [
        "sm_80", "sm_89", "sm_100"]
