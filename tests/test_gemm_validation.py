"""Input validation of the public GEMMs, on CPU tensors: every malformed input raises the right
class with a message that names the argument. Device problems come last, so CPU tensors with a
wrong dtype or shape are rejected for that, and well-formed CPU tensors for the device."""
import pytest
import torch

import dgemm

FP8 = torch.float8_e4m3fn


def fp8(*shape):
    return torch.zeros(shape, dtype=FP8)


def f32(*shape):
    return torch.ones(shape, dtype=torch.float32)


def bf16(*shape):
    return torch.zeros(shape, dtype=torch.bfloat16)


def dense(m=64, n=256, k=256):
    return (fp8(m, k), f32(m, k // 128)), (fp8(n, k), f32((n + 127) // 128, k // 128)), bf16(m, n)


def contiguous(m=256, n=256, k=256, groups=2):
    a = (fp8(m, k), f32(m, k // 128))
    b = (fp8(groups, n, k), f32(groups, (n + 127) // 128, k // 128))
    return a, b, bf16(m, n), torch.zeros(m, dtype=torch.int32)


def masked(groups=2, max_m=64, n=256, k=256):
    a = (fp8(groups, max_m, k), f32(groups, max_m, k // 128))
    b = (fp8(groups, n, k), f32(groups, (n + 127) // 128, k // 128))
    return a, b, bf16(groups, max_m, n), torch.zeros(groups, dtype=torch.int32)


# --- fp8_gemm_nt ----------------------------------------------------------------------------------
def test_a_that_is_not_a_pair_raises_type_error_naming_a():
    _, b, d = dense()
    with pytest.raises(TypeError, match=r"fp8_gemm_nt: a must be a tuple"):
        dgemm.fp8_gemm_nt(fp8(64, 256), b, d)


def test_a_pair_of_three_reports_its_length():
    a, b, d = dense()
    with pytest.raises(TypeError, match=r"length 3"):
        dgemm.fp8_gemm_nt((a[0], a[1], a[1]), b, d)


def test_bf16_lhs_raises_type_error_with_a_quantisation_hint():
    a, b, d = dense()
    with pytest.raises(TypeError, match=r"a\[0\] must be float8_e4m3fn; got torch.bfloat16"
                                        r".*per_token_cast_to_fp8"):
        dgemm.fp8_gemm_nt((a[0].to(torch.bfloat16), a[1]), b, d)


def test_bf16_rhs_raises_type_error_with_a_block_quantisation_hint():
    a, b, d = dense()
    with pytest.raises(TypeError, match=r"b\[0\].*per_block_cast_to_fp8"):
        dgemm.fp8_gemm_nt(a, (b[0].to(torch.bfloat16), b[1]), d)


def test_float16_scales_raise_type_error():
    a, b, d = dense()
    with pytest.raises(TypeError, match=r"a\[1\] \(scales\) must be float32; got torch.float16"):
        dgemm.fp8_gemm_nt((a[0], a[1].half()), b, d)


def test_a_scale_that_is_not_a_tensor_raises_type_error():
    a, b, d = dense()
    with pytest.raises(TypeError, match=r"a\[1\] must be a torch.Tensor; got list"):
        dgemm.fp8_gemm_nt((a[0], [1.0]), b, d)


def test_float32_output_raises_type_error():
    a, b, _ = dense()
    with pytest.raises(TypeError, match=r"d must be bfloat16"):
        dgemm.fp8_gemm_nt(a, b, torch.zeros(64, 256))


def test_three_dimensional_lhs_raises_value_error():
    _, b, d = dense()
    with pytest.raises(ValueError, match=r"a\[0\] must be 2-D"):
        dgemm.fp8_gemm_nt((fp8(1, 64, 256), f32(64, 2)), b, d)


def test_mismatched_k_raises_value_error_showing_both_shapes():
    a, _, d = dense(k=256)
    _, b, _ = dense(k=384)
    with pytest.raises(ValueError, match=r"\(64, 256\).*\(256, 384\).*K differs"):
        dgemm.fp8_gemm_nt(a, b, d)


def test_k_not_a_multiple_of_128_raises_value_error():
    a = (fp8(64, 200), f32(64, 2))
    b = (fp8(256, 200), f32(2, 2))
    with pytest.raises(ValueError, match=r"K must be a positive multiple of 128; got K=200"):
        dgemm.fp8_gemm_nt(a, b, bf16(64, 256))


def test_wrong_lhs_scale_shape_raises_value_error_with_expected_shape():
    a, b, d = dense()
    with pytest.raises(ValueError, match=r"a\[1\] \(scales\) must have shape .* = \(64, 2\); "
                                         r"got \(64, 1\)"):
        dgemm.fp8_gemm_nt((a[0], f32(64, 1)), b, d)


def test_rhs_scales_use_ceil_of_n_over_128():
    a = (fp8(64, 256), f32(64, 2))
    b = (fp8(200, 256), f32(1, 2))
    with pytest.raises(ValueError, match=r"b\[1\] \(scales\) must have shape .* = \(2, 2\)"):
        dgemm.fp8_gemm_nt(a, b, bf16(64, 200))


def test_wrong_output_shape_raises_value_error():
    a, b, _ = dense()
    with pytest.raises(ValueError, match=r"d must have shape \(m, n\) = \(64, 256\); got "
                                         r"\(64, 128\)"):
        dgemm.fp8_gemm_nt(a, b, bf16(64, 128))


def test_transposed_rhs_raises_value_error_about_contiguity():
    a, _, d = dense(n=256, k=256)
    b = (fp8(256, 256).t(), f32(2, 2))
    with pytest.raises(ValueError, match=r"b\[0\] must be contiguous"):
        dgemm.fp8_gemm_nt(a, b, d)


def test_non_contiguous_output_raises_value_error():
    a, b, _ = dense(m=64, n=256)
    d = bf16(256, 64).t()
    with pytest.raises(ValueError, match=r"d must be contiguous"):
        dgemm.fp8_gemm_nt(a, b, d)


def test_unaligned_lhs_view_raises_value_error_about_alignment():
    a, b, d = dense(m=64)
    storage = fp8(64 * 256 + 8)
    lhs = storage[8:].view(64, 256)
    with pytest.raises(ValueError, match=r"16-byte aligned"):
        dgemm.fp8_gemm_nt((lhs, a[1]), b, d)


def test_cpu_tensors_raise_runtime_error_about_the_device():
    a, b, d = dense()
    with pytest.raises(RuntimeError, match=r"must be on a CUDA device; a\[0\] is on cpu"):
        dgemm.fp8_gemm_nt(a, b, d)


def test_zero_n_raises_value_error():
    a = (fp8(64, 256), f32(64, 2))
    b = (fp8(0, 256), f32(0, 2))
    with pytest.raises(ValueError, match=r"N must be at least 1"):
        dgemm.fp8_gemm_nt(a, b, bf16(64, 0))


# --- contiguous layout ----------------------------------------------------------------------------
def test_int64_m_indices_raise_type_error():
    a, b, d, m_indices = contiguous()
    with pytest.raises(TypeError, match=r"m_indices must be int32"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices.long())


def test_two_dimensional_grouped_rhs_raises_value_error():
    a, _, d, m_indices = contiguous()
    with pytest.raises(ValueError, match=r"b\[0\] must be 3-D \(groups, n, k\)"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, (fp8(256, 256), f32(2, 2)), d, m_indices)


def test_grouped_rhs_scales_need_a_group_dimension():
    a, b, d, m_indices = contiguous(groups=2)
    with pytest.raises(ValueError, match=r"\(groups, ceil\(n / 128\), k / 128\) = \(2, 2, 2\)"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, (b[0], f32(2, 2)), d, m_indices)


def test_m_indices_of_wrong_length_raise_value_error():
    a, b, d, _ = contiguous(m=256)
    with pytest.raises(ValueError, match=r"m_indices must have shape \(m_sum,\) = \(256,\)"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, torch.zeros(128, dtype=torch.int32))


def test_total_rows_not_a_multiple_of_the_alignment_raise_value_error():
    a, b, d, m_indices = contiguous(m=200)
    with pytest.raises(ValueError, match=r"m_sum=200 must be a multiple of 128.*"
                                         r"get_mk_alignment_for_contiguous_layout"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices)


def test_contiguous_layout_alignment_is_128():
    assert dgemm.get_mk_alignment_for_contiguous_layout() == 128


def test_contiguous_with_cpu_tensors_raises_runtime_error():
    with pytest.raises(RuntimeError, match=r"CUDA device"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(*contiguous())


# --- masked layout --------------------------------------------------------------------------------
def test_group_count_mismatch_between_a_and_b_raises_value_error():
    a, _, d, masked_m = masked(groups=2)
    _, b, _, _ = masked(groups=3)
    with pytest.raises(ValueError, match=r"a\[0\] has 2 groups but b\[0\] has 3"):
        dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 32)


def test_masked_m_with_one_entry_per_group_too_few_raises_value_error():
    a, b, d, _ = masked(groups=2)
    with pytest.raises(ValueError, match=r"masked_m must have shape \(groups,\) = \(2,\)"):
        dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, torch.zeros(1, dtype=torch.int32), 32)


def test_float_masked_m_raises_type_error():
    a, b, d, masked_m = masked()
    with pytest.raises(TypeError, match=r"masked_m must be int32"):
        dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m.float(), 32)


@pytest.mark.parametrize("expected_m", [0, -4, 2.5, True])
def test_expected_m_must_be_a_positive_int(expected_m):
    with pytest.raises(ValueError, match=r"expected_m must be a positive int"):
        dgemm.m_grouped_fp8_gemm_nt_masked(*masked()[:4], expected_m)


def test_masked_output_with_wrong_max_m_raises_value_error():
    a, b, _, masked_m = masked(groups=2, max_m=64)
    with pytest.raises(ValueError, match=r"d must have shape \(groups, max_m, n\) = "
                                         r"\(2, 64, 256\)"):
        dgemm.m_grouped_fp8_gemm_nt_masked(a, b, bf16(2, 32, 256), masked_m, 32)


def test_masked_lhs_scales_must_be_per_group():
    a, b, d, masked_m = masked(groups=2, max_m=64)
    with pytest.raises(ValueError, match=r"a\[1\] \(scales\) must have shape"):
        dgemm.m_grouped_fp8_gemm_nt_masked((a[0], f32(64, 2)), b, d, masked_m, 32)


def test_masked_with_cpu_tensors_raises_runtime_error():
    with pytest.raises(RuntimeError, match=r"CUDA device"):
        dgemm.m_grouped_fp8_gemm_nt_masked(*masked(), 32)
