"""sm_90a FP8 GEMMs (csrc/dgemm/fp8_gemm.cuh) against a float32 reference of the unquantised
inputs: dense shapes of DeepSeek-V3, odd shapes, both compilers, and the grouped layouts.

Every check draws fresh random inputs and poisons the output first, so an unwritten element
(NaN) or a written one that must stay untouched fails the test.
"""
from __future__ import annotations

import random

import pytest
import torch

import dgemm
import dgemm.kernels.loader
from dgemm import heuristics

from helpers import (DENSE_SHAPES, DIFF_BAR, SHAPES, calc_diff_rows, overwritten_count, poisoned,
                     random_contiguous, random_dense, random_masked, unwritten_count)

ODD = [(m, n, k) for m in (1, 7, 63, 65, 129, 1000, 4097) for n, k in ((576, 7168), (2120, 256))]
ODD += [(128, 100, 512), (200, 8, 128), (33, 4104, 384), (64, 1000, 1152), (4097, 4096, 1024)]
# A pair of m-blocks holding all of M shares B (the second m-block 72 rows or 1 row).
ODD += [(200, 10240, 8192), (129, 10240, 8192)]

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90 (Hopper) GPU")


def print_row(name: str, m: int, n: int, k: int, diff: float) -> None:
    print(f"{name:<18} {m:>6} {n:>6} {k:>6} {diff:>9.1e}")


@pytest.mark.parametrize("m,n,k", DENSE_SHAPES + ODD)
def test_dense_gemm_matches_reference(m, n, k):
    case = random_dense(m, n, k)
    d = poisoned(m, n)
    dgemm.fp8_gemm_nt(case.a, case.b, d)
    assert unwritten_count(d) == 0, f"{m}x{n}x{k}: unwritten output elements"
    diff = dgemm.calc_diff(d, case.ref)
    print_row("fp8_gemm_nt", m, n, k, diff)
    assert diff < DIFF_BAR, f"{m}x{n}x{k}: calc_diff {diff:.2e}"


def test_dense_gemm_allocates_output_when_d_is_none():
    case = random_dense(130, 264, 512)
    d = dgemm.fp8_gemm_nt(case.a, case.b)
    assert d.shape == (130, 264) and d.dtype == torch.bfloat16
    assert dgemm.calc_diff(d, case.ref) < DIFF_BAR


def test_dense_gemm_is_deterministic_across_calls():
    case = random_dense(1000, 2112, 7168)
    assert torch.equal(dgemm.fp8_gemm_nt(case.a, case.b), dgemm.fp8_gemm_nt(case.a, case.b))


def test_nvrtc_and_nvcc_builds_give_identical_results(monkeypatch):
    case = random_dense(257, 2112, 1536)
    outputs, loaded = {}, {}
    spec = dgemm.heuristics.select("fp8_gemm_nt", 257, 2112, 1536, num_sms=dgemm.get_num_sms())
    for compiler in ("nvrtc", "nvcc"):
        # No reset between the two: a changed DGEMM_JIT_COMPILER must load the other build.
        monkeypatch.setenv("DGEMM_JIT_COMPILER", compiler)
        outputs[compiler] = dgemm.fp8_gemm_nt(case.a, case.b)
        loaded[compiler] = dgemm.kernels.loader.get_kernel(spec)
    assert loaded["nvrtc"] is not loaded["nvcc"]
    assert torch.equal(outputs["nvrtc"], outputs["nvcc"])


def test_hopper_and_portable_kernels_agree(monkeypatch):
    case = random_dense(200, 576, 2048)
    hopper = dgemm.fp8_gemm_nt(case.a, case.b)
    monkeypatch.setenv("DGEMM_FORCE_PORTABLE", "1")
    portable = dgemm.fp8_gemm_nt(case.a, case.b)
    assert dgemm.calc_diff(hopper, portable) < 1e-5


# ---- grouped: contiguous layout ------------------------------------------------------------
def check_contiguous(group_rows, n, k):
    case = random_contiguous(group_rows, n, k)
    d = poisoned(case.m_indices.numel(), n)
    dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, case.m_indices)
    assert overwritten_count(d, ~case.valid) == 0, "padding rows (-1) were written"
    assert unwritten_count(d, case.valid) == 0, "unwritten rows"
    for g in range(len(group_rows)):
        diff = calc_diff_rows(d, case.ref, case.m_indices == g)
        assert diff < DIFF_BAR, f"group {g} ({group_rows[g]} rows): calc_diff {diff:.2e}"
    print_row(f"contiguous G={len(group_rows)}", sum(group_rows), n, k, 0.0)


@pytest.mark.parametrize("case", SHAPES["grouped_contiguous"],
                         ids=lambda c: f"{c['groups']}x{c['m_per_group']}x{c['n']}x{c['k']}")
def test_contiguous_grouped_gemm_matches_reference(case):
    rng = random.Random(case["groups"] * case["n"])
    rows = [int(case["m_per_group"] * rng.uniform(0.7, 1.3)) for _ in range(case["groups"])]
    check_contiguous(rows, case["n"], case["k"])


@pytest.mark.parametrize("group_rows", [[0, 5, 0], [1], [300, 0, 1, 129], [128] * 64, [7] * 64],
                         ids=["empty-groups", "one-row", "mixed", "G64-full", "G64-tiny"])
def test_contiguous_grouped_gemm_edge_cases(group_rows):
    check_contiguous(group_rows, 576, 512)


def test_contiguous_grouped_gemm_with_all_rows_padding_writes_nothing():
    case = random_contiguous([0, 0], 256, 256)
    m_indices = torch.full_like(case.m_indices, -1)
    d = poisoned(m_indices.numel(), 256)
    dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, m_indices)
    assert unwritten_count(d) == d.numel()


# ---- grouped: masked layout ----------------------------------------------------------------
def check_masked(case, d):
    assert overwritten_count(d, ~case.valid) == 0, "rows >= masked_m were written"
    assert unwritten_count(d, case.valid) == 0, "unwritten rows"
    for g, rows in enumerate(case.masked_m.tolist()):
        diff = calc_diff_rows(d[g], case.ref[g], case.valid[g])
        assert diff < DIFF_BAR, f"group {g} ({rows} rows): calc_diff {diff:.2e}"


@pytest.mark.parametrize("shape", SHAPES["grouped_masked"],
                         ids=lambda c: f"{c['groups']}x{c['expected_m']}x{c['n']}x{c['k']}")
def test_masked_grouped_gemm_matches_reference(shape):
    rng = random.Random(shape["groups"] * shape["n"])
    rows = [int(shape["expected_m"] * rng.uniform(0.7, 1.3)) for _ in range(shape["groups"])]
    case = random_masked(rows, shape["max_m"], shape["n"], shape["k"])
    d = poisoned(shape["groups"], shape["max_m"], shape["n"])
    dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, shape["expected_m"])
    check_masked(case, d)


@pytest.mark.parametrize("masked", [[0, 0], [1, 0, 64, 65], [256] * 3, [3] * 64],
                         ids=["all-zero", "mixed", "full", "G64"])
def test_masked_grouped_gemm_edge_cases(masked):
    case = random_masked(masked, 256, 576, 512)
    d = poisoned(len(masked), 256, 576)
    dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, max(1, max(masked)))
    check_masked(case, d)


def test_masked_gemm_cuda_graph_replays_with_new_masked_m():
    case = random_masked([100, 200, 300, 400], 512, 2112, 1024)
    d = poisoned(4, 512, 2112)
    run = lambda: dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, 256)  # noqa: E731
    run()                                   # compile and load outside the capture
    compiles = dgemm.jit.stats()["compiles"]
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        run()
    for values in ([512, 0, 17, 256], [1, 2, 3, 4], [0, 0, 0, 0], [300, 500, 129, 64]):
        case.masked_m.copy_(torch.tensor(values, dtype=torch.int32))
        case.valid = torch.arange(512, device="cuda")[None, :] < case.masked_m[:, None]
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check_masked(case, d)
    assert dgemm.jit.stats()["compiles"] == compiles


def test_masked_m_above_max_m_is_clamped_to_max_m():
    case = random_masked([128, 5], 128, 256, 256)
    case.masked_m.copy_(torch.tensor([1000, 5], dtype=torch.int32))
    d = poisoned(2, 128, 256)
    dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, 128)
    torch.cuda.synchronize()
    case.masked_m.copy_(torch.tensor([128, 5], dtype=torch.int32))   # what must have been written
    check_masked(case, d)


# ---- every tile shape the heuristic can pick, forced -----------------------------------------
# The heuristic picks each tile shape only for some problem shapes; forcing them here checks
# each one on tails (M, N not multiples of the tile, N % 8 != 0, one K block) in all layouts.
FORCED_TILES = [(64, 16), (64, 112), (128, 96), (128, 160), (128, 192), (128, 256), (192, 128)]


@pytest.mark.parametrize("block_m,block_n", FORCED_TILES, ids=lambda v: str(v))
@pytest.mark.parametrize("m,n,k", [(4097, 2112, 1024), (129, 1000, 128), (65, 100, 1152)])
def test_forced_tile_dense(block_m, block_n, m, n, k):
    case = random_dense(m, n, k)
    d = poisoned(m, n)
    with heuristics.forced_tile(block_m, block_n):
        dgemm.fp8_gemm_nt(case.a, case.b, d)
    assert unwritten_count(d) == 0
    diff = dgemm.calc_diff(d, case.ref)
    assert diff < DIFF_BAR, f"{block_m}x{block_n} on {m}x{n}x{k}: calc_diff {diff:.2e}"


# 256-row tiles (the plain GEMM only): two 128-row waves per warpgroup; 96 columns straddle
# B-scale blocks (a compile-time split) and store without TMA. M = 300 and 129 leave the second
# wave of the last m-block wholly past M.
@pytest.mark.parametrize("block_n", [64, 96, 128], ids=lambda v: f"256x{v}")
@pytest.mark.parametrize("m,n,k", [(4097, 2112, 1024), (129, 1000, 128), (65, 100, 1152),
                                   (300, 2112, 7168), (2048, 4096, 4096)])
def test_forced_256_row_tiles_dense(block_n, m, n, k):
    case = random_dense(m, n, k)
    d = poisoned(m, n)
    with heuristics.forced_tile(256, block_n):
        dgemm.fp8_gemm_nt(case.a, case.b, d)
    assert unwritten_count(d) == 0
    diff = dgemm.calc_diff(d, case.ref)
    assert diff < DIFF_BAR, f"256x{block_n} on {m}x{n}x{k}: calc_diff {diff:.2e}"


def test_256_row_tiles_sharing_a_survive_many_calls_bitwise():
    # Many tiles per CTA (4096x4096: 16 x 32 tiles over 66 clusters), a ring that rotates
    # (56 K blocks, 3 stages): every call must give the first call's bits.
    case = random_dense(4096, 4096, 7168)
    with heuristics.forced_tile(256, 128, num_tma_multicast=2, multicast_on_a=True):
        first = dgemm.fp8_gemm_nt(case.a, case.b)
        assert dgemm.calc_diff(first, case.ref) < DIFF_BAR
        d = torch.empty_like(first)
        for _ in range(100):
            dgemm.fp8_gemm_nt(case.a, case.b, d)
        torch.cuda.synchronize()
    assert torch.equal(d, first)


@pytest.mark.parametrize("block_m,block_n", [t for t in FORCED_TILES if t[0] != 192],
                         ids=lambda v: str(v))
def test_forced_tile_contiguous(block_m, block_n):
    with heuristics.forced_tile(block_m, block_n):
        check_contiguous([300, 0, 1, 256], 2112, 512)


@pytest.mark.parametrize("block_m,block_n", FORCED_TILES, ids=lambda v: str(v))
def test_forced_tile_masked(block_m, block_n):
    case = random_masked([0, 1, 200, 256], 256, 1000, 384)
    d = poisoned(4, 256, 1000)
    with heuristics.forced_tile(block_m, block_n):
        dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, 128)
    check_masked(case, d)


# ---- 2-CTA clusters sharing one operand through TMA multicast, forced -------------------------
# Odd m-block / n-block counts leave the second CTA of the last cluster a tile past M or N: it
# computes on zeros and must store nothing.
CLUSTER_TILES = [(128, 256, True), (128, 256, False), (192, 128, True), (192, 128, False),
                 (128, 128, False), (64, 112, True), (256, 128, True), (256, 96, True)]


@pytest.mark.parametrize("block_m,block_n,on_a", CLUSTER_TILES,
                         ids=lambda v: {True: "A", False: "B"}.get(v, str(v)))
@pytest.mark.parametrize("m,n,k", [(4097, 2112, 1024), (129, 1000, 128), (65, 100, 1152),
                                   (1000, 4096, 7168)])
def test_forced_cluster_dense(block_m, block_n, on_a, m, n, k):
    case = random_dense(m, n, k)
    d = poisoned(m, n)
    with heuristics.forced_tile(block_m, block_n, num_tma_multicast=2, multicast_on_a=on_a):
        dgemm.fp8_gemm_nt(case.a, case.b, d)
    assert unwritten_count(d) == 0
    diff = dgemm.calc_diff(d, case.ref)
    assert diff < DIFF_BAR, f"{block_m}x{block_n} mc2 on {m}x{n}x{k}: calc_diff {diff:.2e}"


@pytest.mark.parametrize("block_m,block_n", [(128, 256), (128, 128)], ids=lambda v: str(v))
def test_forced_cluster_sharing_a_grouped(block_m, block_n):
    with heuristics.forced_tile(block_m, block_n, num_tma_multicast=2):
        check_contiguous([300, 0, 1, 256], 2112, 512)
    case = random_masked([0, 1, 200, 256], 256, 1000, 384)
    d = poisoned(4, 256, 1000)
    with heuristics.forced_tile(block_m, block_n, num_tma_multicast=2):
        dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, 128)
    check_masked(case, d)


# Contiguous clusters sharing B: a pair whose m-blocks lie in one group multicasts B; a pair
# straddling two groups loads B each for itself; a padding block computes with its partner's
# group and stores nothing; a pair of padding blocks is skipped; an odd m-block count leaves
# the last pair's second block past M.
CONTIGUOUS_PAIRS = {"shared-and-straddling": [300, 0, 1, 256], "odd-blocks": [300],
                    "every-pair-straddles": [7] * 16, "G64-full": [128] * 64}


@pytest.mark.parametrize("block_m,block_n", [(128, 192), (128, 256), (128, 128), (128, 160)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("rows", CONTIGUOUS_PAIRS.values(), ids=CONTIGUOUS_PAIRS.keys())
def test_forced_cluster_sharing_b_contiguous(block_m, block_n, rows):
    with heuristics.forced_tile(block_m, block_n, num_tma_multicast=2, multicast_on_a=False):
        check_contiguous(rows, 2112, 768)


@pytest.mark.parametrize("dropped", [(1,), (0, 3), (3, 4)], ids=lambda v: str(v))
def test_forced_cluster_sharing_b_contiguous_padding_blocks(dropped):
    """Whole 128-row blocks of padding (-1) beside real ones: groups `dropped` are turned into
    padding, so pairs hold one real and one padding block, or two padding blocks."""
    case = random_contiguous([256, 128, 130, 384, 128], 1000, 512)
    for g in dropped:
        case.m_indices[case.m_indices == g] = -1
    valid = case.m_indices >= 0
    d = poisoned(case.m_indices.numel(), 1000)
    with heuristics.forced_tile(128, 192, num_tma_multicast=2, multicast_on_a=False):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, case.m_indices)
    assert overwritten_count(d, ~valid) == 0, "padding rows (-1) were written"
    assert unwritten_count(d, valid) == 0, "unwritten rows"
    for g in set(range(5)) - set(dropped):
        diff = calc_diff_rows(d, case.ref, case.m_indices == g)
        assert diff < DIFF_BAR, f"group {g}: calc_diff {diff:.2e}"


# ---- K-split pairs: two CTAs per tile, each half of K, partial sums exchanged (NOTES e1) -----------
# Widths whose half is stored through TMA (128, 256), with checked 16-byte stores (32..96, 160)
# or, for N % 8 != 0, element by element; tails in M and N; two K blocks (one per CTA); and
# enough tiles per pair that the exchange's barriers run through many phases.
KSPLIT_WIDTHS = [32, 48, 64, 96, 128, 160, 256]


@pytest.mark.parametrize("block_n", KSPLIT_WIDTHS)
@pytest.mark.parametrize("m,n,k", [(4097, 2112, 1024), (129, 1000, 256), (65, 100, 2048),
                                   (33, 1004, 512), (128, 4096, 7168)])
def test_forced_k_split_pairs_dense(block_n, m, n, k):
    case = random_dense(m, n, k)
    d = poisoned(m, n)
    with heuristics.forced_tile(128, block_n, k_split=2):
        spec = heuristics.select("fp8_gemm_nt", m, n, k, num_sms=dgemm.get_num_sms())
        assert spec.k_split == 2 and spec.cluster_dim == 2
        dgemm.fp8_gemm_nt(case.a, case.b, d)
        again = dgemm.fp8_gemm_nt(case.a, case.b)
    assert unwritten_count(d) == 0
    assert torch.equal(d, again), "two calls of a K-split pair differ"
    diff = dgemm.calc_diff(d, case.ref)
    assert diff < DIFF_BAR, f"128x{block_n} ks2 on {m}x{n}x{k}: calc_diff {diff:.2e}"


def test_k_split_pairs_survive_many_calls():
    case = random_dense(128, 4096, 7168)
    d = poisoned(128, 4096)
    with heuristics.forced_tile(128, 64, k_split=2):
        for _ in range(300):
            dgemm.fp8_gemm_nt(case.a, case.b, d)
    torch.cuda.synchronize()
    assert unwritten_count(d) == 0
    assert dgemm.calc_diff(d, case.ref) < DIFF_BAR


def test_k_split_pairs_refuse_grouped_layouts_and_odd_k_blocks():
    case = random_dense(64, 256, 384)                         # 3 K blocks
    with heuristics.forced_tile(128, 64, k_split=2):
        with pytest.raises(ValueError, match="even number"):
            dgemm.fp8_gemm_nt(case.a, case.b)
        masked = random_masked([5, 7], 64, 256, 512)
        with pytest.raises(ValueError, match="K-split"):
            dgemm.m_grouped_fp8_gemm_nt_masked(masked.a, masked.b, poisoned(2, 64, 256),
                                               masked.masked_m, 8)


# ---- 64-row tiles over many calls (bench/NOTES.md v23) ------------------------------------------
# Before v23 the two math warpgroups of a 64-row tile took K blocks by parity, so with an odd
# stage count (64x144x7 for 4x36864x7168, 64x160x7 for masked ~64 rows of 28672x4096) or an odd
# K block count a stage changed hands between laps; runs ended in "unspecified launch failure"
# within a few hundred calls (3000 plain calls of 64x160x7 always faulted, memcheck clean).
def test_small_m_wide_n_picks_survive_many_calls():
    dense = random_dense(4, 36864, 7168)
    d = poisoned(4, 36864)
    masked = random_masked([int(64 * w) for w in torch.empty(8).uniform_(0.7, 1.3)], 128,
                           28672, 4096)
    dm = poisoned(8, 128, 28672)
    for kind, m, n, k, groups in (("fp8_gemm_nt", 4, 36864, 7168, 1),
                                  ("m_grouped_fp8_gemm_nt_masked", 64, 28672, 4096, 8)):
        spec = heuristics.select(kind, m, n, k, groups, num_sms=dgemm.get_num_sms())
        assert spec.block_m != 64 or spec.num_stages % 2 == 0, spec
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(300):
        flush.zero_()
        dgemm.fp8_gemm_nt(dense.a, dense.b, d)
        flush.zero_()
        dgemm.m_grouped_fp8_gemm_nt_masked(masked.a, masked.b, dm, masked.masked_m, 64)
    torch.cuda.synchronize()
    assert unwritten_count(d) == 0 and dgemm.calc_diff(d, dense.ref) < DIFF_BAR
    check_masked(masked, dm)


# 56 and 128 run the pipelined one chain (128: its widest, two accumulators at the register
# limit), 144 and 160 the pair; 48 x 8192 gives some CTAs a second tile that starts mid-ring.
@pytest.mark.parametrize("block_n", [56, 128, 144, 160])
@pytest.mark.parametrize("k", [384, 1152, 7168])        # 3, 9 (odd) and 56 K blocks
def test_forced_64_row_tiles_survive_many_calls_at_odd_and_even_k_blocks(block_n, k):
    case = random_dense(48, 8192, k)
    d = poisoned(48, 8192)
    with heuristics.forced_tile(64, block_n):
        for _ in range(300):
            dgemm.fp8_gemm_nt(case.a, case.b, d)
    torch.cuda.synchronize()
    assert unwritten_count(d) == 0
    assert dgemm.calc_diff(d, case.ref) < DIFF_BAR


# A chain (one warpgroup takes every stage) may run an odd ring, as the autotuner's depth
# candidate does (64x64 with 13 stages): each lap of the pipelined chain starts drained, so the
# accumulator parity restarts at stage 0 (bench/NOTES.md session 34). 48 x 8192 at 3, 9 and 56
# K blocks: some CTAs take a second tile that starts mid-ring.
@pytest.mark.parametrize("block_n,stages", [(64, 13), (56, 5), (128, 3)])
@pytest.mark.parametrize("k", [384, 1152, 7168])
def test_64_row_chains_with_an_odd_ring_survive_many_calls(block_n, stages, k):
    import dataclasses
    from dgemm.kernels import hopper_fp8
    case = random_dense(48, 8192, k)
    (a, sa), (b, sb) = case.a, case.b
    base = heuristics.select("fp8_gemm_nt", 48, 8192, k, num_sms=dgemm.get_num_sms())
    spec = dataclasses.replace(hopper_fp8.with_tile(base, 64, block_n),
                               num_stages=min(stages, hopper_fp8.max_stages(64, block_n, k)))
    assert spec.num_stages % 2 and not hopper_fp8.runs_pair(64, block_n, k, spec.num_stages)
    d = poisoned(48, 8192)
    for _ in range(300):
        hopper_fp8.launch(spec, a, sa, b, sb, d, None)
    torch.cuda.synchronize()
    assert unwritten_count(d) == 0
    assert dgemm.calc_diff(d, case.ref) < DIFF_BAR


# ---- The last m-block loads only its real rows of A (bench/NOTES.md v24) -----------------------
# The rest of that A stage keeps whatever the last load left there (here: NaN rows of a call of
# the same kernel on more rows); rows below M must come out bitwise as with zero fill.
@pytest.mark.parametrize("block_m,block_n", [(64, 64), (128, 96), (64, 144), (192, 128),
                                             (256, 128)], ids=lambda v: str(v))
def test_rows_past_m_in_the_last_m_block_never_reach_rows_below_m(block_m, block_n):
    case = random_dense(2 * block_m, 2112, 1024)
    a, sa = case.a
    with heuristics.forced_tile(block_m, block_n):
        for m in (1, 7, block_m + 7):
            poisoned_a = a.clone()
            poisoned_a.view(torch.uint8)[m:] = 0x7F               # e4m3 NaN past row m
            full = dgemm.fp8_gemm_nt((poisoned_a, sa), case.b)
            assert torch.isnan(full[m:]).any()                   # the poison was real
            d = poisoned(m, 2112)
            dgemm.fp8_gemm_nt((a[:m], sa[:m]), case.b, d)
            assert unwritten_count(d) == 0
            assert torch.equal(d, full[:m]), f"M={m}: rows below M changed"
            assert dgemm.calc_diff(d, case.ref[:m]) < DIFF_BAR
