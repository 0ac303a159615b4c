"""The weight-gradient GEMMs on a GPU (recipe (1, 1, 128)): `fp8_gemm_nt(a, b, d, c=c,
recipe=(1, 1, 128))` and `k_grouped_fp8_gemm_nt_contiguous`, on the sm_90a wgrad kernel and on
the portable one (the oracle, DGEMM_FORCE_PORTABLE=1).

The reference is the fp32 product of the dequantised fp8 operands plus `c`, so calc_diff
measures the kernel alone. Outputs are poisoned with NaN first (an element not written stays
NaN; `d is c` cases poison nothing but check the accumulation onto c's random values).
The Hopper kernel has two epilogues (TMA reductions into d when N % 4 == 0, else from the
registers: the odd-N shapes) and 2-CTA clusters whose odd block counts leave a CTA of a pair
idle (odd M- and N-block counts below).
"""
from __future__ import annotations

import random

import pytest
import torch

import dgemm
from helpers import DIFF_BAR

WGRAD = (1, 1, 128)


@pytest.fixture(params=["native", "portable"])
def family(request, monkeypatch):
    if request.param == "portable":
        monkeypatch.setenv("DGEMM_FORCE_PORTABLE", "1")
    return request.param


def _quantized(rows: int, k: int):
    """A K-major operand [rows, k] as fp8 with 1x128 scales, and its dequantised fp32 value."""
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    if k == 0:
        return (torch.empty(rows, 0, device="cuda", dtype=torch.float8_e4m3fn),
                torch.empty(rows, 0, device="cuda")), torch.zeros(rows, 0, device="cuda")
    data, scales = dgemm.per_token_cast_to_fp8(x)
    value = (data.float().view(rows, k // 128, 128) * scales.unsqueeze(-1)).view(rows, k)
    return (data, scales), value


def _reference(a_value, b_value, c):
    return c + a_value @ b_value.t()


def _nan_like(t):
    return torch.full_like(t, float("nan"))


# Odd M and N, N < tile, several waves; every K the API accepts from 0 through long ones.
SHAPES = [(m, n, k) for (m, n) in ((1, 1), (7, 129), (129, 2049), (2112, 7168), (255, 4097))
          for k in (128, 384, 4096)]
SHAPES += [(256, 512, 0), (4096, 7168, 16384), (7168, 2048, 8192)]


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_dense_wgrad_matches_fp32_onto_random_c(m, n, k, in_place, family):
    a, a_value = _quantized(m, k)
    b, b_value = _quantized(n, k)
    c = torch.randn(m, n, device="cuda") * 32
    expected = _reference(a_value, b_value, c)
    d = c if in_place else _nan_like(c)
    c_before = c.clone()
    out = dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD)
    assert out is d
    assert not out.isnan().any(), "an element of d was not written"
    assert dgemm.calc_diff(out, expected) < DIFF_BAR
    if not in_place:
        assert torch.equal(c, c_before), "c was written"


def test_every_k_block_gets_its_own_row_and_column_scale(family):
    """Scales that differ per row, per column and per K block: a kernel that used one B scale
    per 128 columns, or the wrong K block's scale, fails here."""
    m, n, k = 256, 384, 1024
    a, a_value = _quantized(m, k)
    b, b_value = _quantized(n, k)
    a = (a[0], a[1] * torch.rand_like(a[1]) * 4)
    b = (b[0], b[1] * torch.rand_like(b[1]) * 4)
    a_value = (a[0].float().view(m, -1, 128) * a[1].unsqueeze(-1)).view(m, k)
    b_value = (b[0].float().view(n, -1, 128) * b[1].unsqueeze(-1)).view(n, k)
    c = torch.zeros(m, n, device="cuda")
    d = dgemm.fp8_gemm_nt(a, b, _nan_like(c), c=c, recipe=WGRAD)
    assert dgemm.calc_diff(d, a_value @ b_value.t()) < DIFF_BAR


def test_repeated_in_place_accumulation_sums_every_step(family):
    m, n, k = 512, 640, 512
    c = torch.zeros(m, n, device="cuda")
    expected = torch.zeros_like(c)
    for _ in range(4):
        a, a_value = _quantized(m, k)
        b, b_value = _quantized(n, k)
        expected += a_value @ b_value.t()
        dgemm.fp8_gemm_nt(a, b, c, c=c, recipe=WGRAD)
    assert dgemm.calc_diff(c, expected) < DIFF_BAR


def _k_grouped_inputs(m: int, n: int, ks: list):
    a_parts, b_parts, sa_parts, sb_parts, a_values, b_values = [], [], [], [], [], []
    for k in ks:
        (a_data, a_scales), a_value = _quantized(m, k)
        (b_data, b_scales), b_value = _quantized(n, k)
        a_parts.append(a_data.flatten()), b_parts.append(b_data.flatten())
        sa_parts.append(a_scales), sb_parts.append(b_scales)
        a_values.append(a_value), b_values.append(b_value)
    a = (torch.cat(a_parts), torch.cat(sa_parts, dim=1))
    b = (torch.cat(b_parts), torch.cat(sb_parts, dim=1))
    return a, b, a_values, b_values


KS = [[128, 0, 384, 256], [0, 0, 128], [0], [4096, 2048, 0, 128, 6144, 3072, 1024, 512],
      [random.Random(7).randrange(0, 64) * 128 for _ in range(16)]]


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("m, n", [(4096, 7168), (7168, 2048), (129, 257), (1, 1)])
@pytest.mark.parametrize("ks", KS, ids=lambda ks: f"g{len(ks)}-k{sum(ks)}")
def test_k_grouped_matches_fp32_per_group(m, n, ks, in_place, family):
    a, b, a_values, b_values = _k_grouped_inputs(m, n, ks)
    groups = len(ks)
    c = torch.randn(groups, m, n, device="cuda") * 32
    expected = torch.stack([c[g] + a_values[g] @ b_values[g].t() for g in range(groups)])
    d = c if in_place else _nan_like(c)
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    out = dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=c)
    assert out is d and not out.isnan().any()
    for g in range(groups):
        assert dgemm.calc_diff(out[g], expected[g]) < DIFF_BAR, f"group {g} (K={ks[g]})"


# Widths whose last 8/16/24 columns go through the reduce epilogue's unswizzled tail chunk
# (136: a heuristic candidate; the others probes, `bench_wgrad --tile`), alone and in
# clusters. "tail cut": N ends inside the last tile's tail chunk (N % block_n past its full
# chunks), with 3 m-blocks (a pair sharing B has an idle CTA); the other shapes end the last
# tile inside a full chunk or at its tail's end.
_TAIL_CUT_N = {136: 1084, 152: 1052, 144: 1144, 120: 1060}


def _check_forced_tile(m, n, k, block_n, multicast, on_a, stages, monkeypatch):
    """d = c + a.b^T with every Hopper wgrad selection forced to this tile, cluster and
    stage count (0: as many as fit); no element of d left unwritten, calc_diff within bar."""
    import dataclasses
    from dgemm.kernels import hopper_wgrad
    heuristic = hopper_wgrad.select

    def forced(*args, **kwargs):
        return dataclasses.replace(heuristic(*args, **kwargs), block_n=block_n,
                                   num_stages=stages or hopper_wgrad.num_stages(block_n),
                                   num_tma_multicast=multicast, multicast_on_a=on_a)
    dgemm.jit.state.reset()               # no remembered plan of another tile answers
    monkeypatch.setattr(hopper_wgrad, "select", forced)
    a, a_value = _quantized(m, k)
    b, b_value = _quantized(n, k)
    c = torch.randn(m, n, device="cuda") * 32
    out = dgemm.fp8_gemm_nt(a, b, _nan_like(c), c=c, recipe=WGRAD)
    torch.cuda.synchronize()
    assert not out.isnan().any(), "an element of d was not written"
    assert dgemm.calc_diff(out, _reference(a_value, b_value, c)) < DIFF_BAR


@pytest.mark.parametrize("block_n, multicast, on_a",
                         [(136, 1, False), (152, 1, False), (152, 2, False), (120, 2, True),
                          (144, 1, False), (120, 1, False)])
@pytest.mark.parametrize("m, n, k", [(392, 1012, 640), (129, 3100, 384), (300, "tail cut", 384)])
def test_tail_chunk_widths_match_fp32(m, n, k, block_n, multicast, on_a, monkeypatch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm_90a wgrad kernel needs Hopper")
    if n == "tail cut":
        n = _TAIL_CUT_N[block_n]
        assert 32 * (block_n // 32) < n % block_n < block_n
    _check_forced_tile(m, n, k, block_n, multicast, on_a, 0, monkeypatch)


# The reduce epilogue's chunk ring: tiles whose chunks outnumber their slots (128 and 136 at
# five stages: three slots; 152 and 160: two) reuse slots within a tile, on grids where every
# CTA walks several tiles, alone and in clusters, N cut inside a chunk.
@pytest.mark.parametrize("block_n, multicast", [(128, 1), (136, 1), (136, 2), (152, 1),
                                                (160, 1)])
@pytest.mark.parametrize("m, n, k", [(1100, 4100, 256), (2048, 2050, 128)])
def test_chunk_ring_tiles_match_fp32(m, n, k, block_n, multicast, monkeypatch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm_90a wgrad kernel needs Hopper")
    from dgemm.kernels import hopper_wgrad
    stages = hopper_wgrad.num_stages(block_n)
    assert hopper_wgrad.d_slots(128, block_n, stages) < hopper_wgrad.d_chunks(block_n)
    _check_forced_tile(m, n, k, block_n, multicast, False, 0, monkeypatch)


# The two-accumulator loop (tiles up to 136 columns) in 2-CTA clusters sharing B or A, and on
# short rings (2 stages: the ring wraps every other K block, the scale slots every lap), with
# 1, 2, 3 and 5 K blocks per tile (the loop's tails) and odd block counts.
@pytest.mark.parametrize("block_n, multicast, on_a, stages",
                         [(128, 2, False, 0), (128, 2, True, 0), (128, 1, False, 2),
                          (64, 1, False, 2), (96, 2, False, 3), (136, 2, False, 0),
                          (136, 1, False, 2)])
@pytest.mark.parametrize("m, n, k", [(300, 1000, 128), (300, 1000, 256), (129, 520, 384),
                                     (392, 1012, 640)])
def test_two_accumulator_tiles_in_clusters_and_short_rings_match_fp32(
        m, n, k, block_n, multicast, on_a, stages, monkeypatch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm_90a wgrad kernel needs Hopper")
    from dgemm.kernels import hopper_wgrad
    assert hopper_wgrad.two_accumulators(block_n)
    _check_forced_tile(m, n, k, block_n, multicast, on_a, stages, monkeypatch)


def test_the_wgrad_kernels_agree_with_the_portable_oracle(monkeypatch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm_90a wgrad kernel needs Hopper")
    m, n, k = 2112, 7168, 4096
    a, _ = _quantized(m, k)
    b, _ = _quantized(n, k)
    c = torch.randn(m, n, device="cuda")
    native = dgemm.fp8_gemm_nt(a, b, _nan_like(c), c=c, recipe=WGRAD)
    monkeypatch.setenv("DGEMM_FORCE_PORTABLE", "1")
    oracle = dgemm.fp8_gemm_nt(a, b, _nan_like(c), c=c, recipe=WGRAD)
    assert dgemm.calc_diff(native, oracle) < 1e-6


# --- CUDA graphs (after dgemm.warmup) and the DeepGEMM drop-in --------------------------------
def _mn_major(pair):
    return pair[0], dgemm.get_mn_major_tma_aligned_tensor(pair[1])


def _capture(fn):
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        fn()
    return graph


def test_dense_wgrad_captures_and_replays_after_warmup():
    m, n, k = 2112, 7168, 4096
    report = dgemm.warmup("fp8_gemm_nt", m=m, n=n, recipe=WGRAD)
    assert len(report.specs) == 1
    a, a_value = _quantized(m, k)
    b, b_value = _quantized(n, k)
    a, b = _mn_major(a), _mn_major(b)
    c = torch.randn(m, n, device="cuda")
    d = c.clone()
    graph = _capture(lambda: dgemm.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD))
    assert torch.equal(d, c), "capturing ran the kernel"
    graph.replay()
    graph.replay()                                  # accumulates twice: d = c + 2 a.b^T
    torch.cuda.synchronize()
    assert dgemm.calc_diff(d, c + 2 * (a_value @ b_value.t())) < DIFF_BAR


def test_k_grouped_captures_and_replays_after_warmup():
    m, n, ks = 4096, 2048, [1024, 0, 384, 2048]
    dgemm.warmup("k_grouped_fp8_gemm_nt_contiguous", m=m, n=n)
    a, b, a_values, b_values = _k_grouped_inputs(m, n, ks)
    a, b = _mn_major(a), _mn_major(b)
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    c = torch.randn(len(ks), m, n, device="cuda")
    d = _nan_like(c)
    graph = _capture(lambda: dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=c))
    graph.replay()
    torch.cuda.synchronize()
    assert not d.isnan().any()
    for g in range(len(ks)):
        assert dgemm.calc_diff(d[g], c[g] + a_values[g] @ b_values[g].t()) < DIFF_BAR, g


def test_a_wgrad_capture_without_warmup_raises_naming_the_warmup_that_fixes_it():
    from dgemm.jit import KernelNotWarmError
    m, n, k = 384, 640, 256               # no other test of this process loads this spec first
    a, a_value = _quantized(m, k)
    b, b_value = _quantized(n, k)
    a, b = _mn_major(a), _mn_major(b)
    c = torch.zeros(m, n, device="cuda")
    with pytest.raises(KernelNotWarmError, match=r"dgemm.warmup\('fp8_gemm_nt', m=384, n=640, "
                                                 r"recipe=\(1, 1, 128\)\)"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            dgemm.fp8_gemm_nt(a, b, c, c=c, recipe=WGRAD)
    dgemm.warmup("fp8_gemm_nt", m=384, n=640, recipe=WGRAD)
    graph = _capture(lambda: dgemm.fp8_gemm_nt(a, b, c, c=c, recipe=WGRAD))
    graph.replay()
    torch.cuda.synchronize()
    assert dgemm.calc_diff(c, a_value @ b_value.t()) < DIFF_BAR


def test_the_drop_in_weight_gradients_give_dgemms_results():
    from dgemm.compat import deep_gemm as dg
    m, n, k = 1024, 2048, 1024
    a, _ = _quantized(m, k)
    b, _ = _quantized(n, k)
    c = torch.randn(m, n, device="cuda")
    ours = dgemm.fp8_gemm_nt(a, b, c.clone(), c=c, recipe=WGRAD)
    for recipe in (dict(recipe=(1, 1, 128)), dict(recipe_a=(1, 128), recipe_b=(1, 128))):
        d = c.clone()
        assert dg.fp8_gemm_nt(a, b, d, c=d, disable_ue8m0_cast=True, **recipe) is None
        assert torch.equal(d, ours), recipe
    ks = [256, 0, 128, 512]
    a, b, a_values, b_values = _k_grouped_inputs(m, n, ks)
    # DeepGEMM's own test passes the scales as MN-major views of [sum K / 128, rows] tensors.
    a = (a[0], a[1].t().contiguous().t())
    b = (b[0], b[1].t().contiguous().t())
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    c = torch.randn(len(ks), m, n, device="cuda")
    d = c.clone()
    assert dg.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, d) is None
    for g in range(len(ks)):
        assert dgemm.calc_diff(d[g], c[g] + a_values[g] @ b_values[g].t()) < DIFF_BAR, g
