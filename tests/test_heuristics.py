"""dgemm.heuristics: a pure, deterministic select() whose specs obey the kernels' constraints."""
import dataclasses
import itertools

import pytest

from dgemm import heuristics, kernels
from dgemm.heuristics import KINDS, KernelSpec, select
from dgemm.jit import state
from dgemm.kernels import hopper_fp8, portable_fp8
from dgemm.kernels.spec import CPP_GEMM_TYPE

DENSE_NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048),
            (576, 7168), (2120, 7168), (1, 128)]
MS = [1, 7, 64, 65, 128, 1000, 4096]
HOPPER_SPECS = [select(kind, m, n, k, num_groups=groups)
                for kind, groups in (("fp8_gemm_nt", 1), ("m_grouped_fp8_gemm_nt_contiguous", 4),
                                     ("m_grouped_fp8_gemm_nt_masked", 8))
                for m, (n, k) in itertools.product(MS, DENSE_NK)]
PORTABLE_SPECS = [select("fp8_gemm_nt", m, n, k, arch=arch)
                  for arch in ("sm_80", "sm_89") for m, (n, k) in itertools.product(MS, DENSE_NK)]


def test_select_returns_the_same_spec_for_the_same_inputs():
    state.reset()                  # forget memoised selections
    first = select("fp8_gemm_nt", 128, 7168, 2048)
    state.reset()
    assert select("fp8_gemm_nt", 128, 7168, 2048) == first


def test_select_is_deterministic_across_processes(python_subprocess):
    code = ("from dgemm.heuristics import select\n"
            "print(select('m_grouped_fp8_gemm_nt_masked', 256, 4096, 7168, 4).to_json())\n")
    outputs = {python_subprocess(code, {"PYTHONHASHSEED": str(s)}).stdout for s in (0, 1)}
    assert outputs == {select("m_grouped_fp8_gemm_nt_masked", 256, 4096, 7168, 4).to_json()
                       + "\n"}


@pytest.mark.parametrize("spec", HOPPER_SPECS[:5] + PORTABLE_SPECS[:2], ids=str)
def test_spec_json_round_trips(spec):
    assert KernelSpec.from_json(spec.to_json()) == spec


def test_spec_json_is_canonical_with_sorted_keys_and_no_spaces():
    text = select("fp8_gemm_nt", 64, 2112, 7168).to_json()
    assert " " not in text and text.index('"arch"') < text.index('"block_k"')


def test_specs_are_hashable_and_equal_by_value():
    assert len({select("fp8_gemm_nt", 64, 2112, 7168), select("fp8_gemm_nt", 64, 2112, 7168)}) == 1


def test_specs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        select("fp8_gemm_nt", 64, 2112, 7168).block_n = 8


def _violations(specs, rule) -> list:
    return [spec.to_json() for spec in specs if not rule(spec)]


def test_block_n_is_a_multiple_of_eight():
    assert _violations(HOPPER_SPECS + PORTABLE_SPECS, lambda s: s.block_n % 8 == 0) == []


def test_hopper_specs_fit_shared_memory():
    # (The plan equals the kernel's own carving: tests/test_jit_real_kernels.py compiles it.)
    assert _violations(HOPPER_SPECS, lambda s: s.smem_bytes <= 232448) == []


def test_hopper_specs_use_a_producer_and_a_math_warpgroup_per_64_rows_or_two_for_64():
    assert _violations(HOPPER_SPECS, lambda s: s.block_m in (64, 128, 192)
                       and s.num_threads == 128 + 128 * max(2, s.block_m // 64)) == []


def test_contiguous_layout_never_gets_tiles_taller_than_its_row_alignment():
    spec = select("m_grouped_fp8_gemm_nt_contiguous", 32768, 4096, 7168, num_groups=4)
    assert 128 % spec.block_m == 0


def test_hopper_pipelines_are_three_deep_unless_k_has_fewer_blocks_and_never_deeper():
    def ok(s):
        k_blocks = -(-s.k // 128)
        return s.block_k == 128 and min(3, k_blocks) <= s.num_stages <= k_blocks
    assert _violations(HOPPER_SPECS, ok) == []


@pytest.mark.parametrize("k", [512, 1536, 2048, 7168, 16384])
def test_pipeline_depth_keeps_the_deepest_fitting_round_count_with_fewest_stages(k):
    spec = select("fp8_gemm_nt", 4096, 7168, k)
    deepest = hopper_fp8.max_stages(spec.block_m, spec.block_n, k)
    assert hopper_fp8.smem_plan(spec.block_m, spec.block_n, k, deepest + 1) > \
        hopper_fp8.SMEM_CAPACITY or deepest == 16
    k_blocks = k // 128
    rounds = -(-k_blocks // spec.num_stages)
    assert rounds == -(-k_blocks // deepest)                  # as few rounds as the deepest
    assert spec.num_stages == 1 or -(-k_blocks // (spec.num_stages - 1)) > rounds   # fewest


def test_256_column_tiles_are_offered_to_128_row_tiles_only_and_fit_three_stages():
    assert 256 in hopper_fp8.block_ns(128)
    assert 256 not in hopper_fp8.block_ns(64) + hopper_fp8.block_ns(192)
    assert hopper_fp8.num_stages(128, 256, 16384) == 3


def test_clusters_share_the_operand_measured_best_and_never_in_masked_gemms():
    for spec in HOPPER_SPECS:
        if spec.num_tma_multicast > 1:
            assert spec.gemm_type in ("normal", "grouped_contiguous")
            assert spec.num_tma_multicast == 2
            # NOTES (bench/NOTES.md v16): 128x256 tiles gained sharing B, 192x128 sharing A.
            expected = {(128, 256): False, (192, 128): True}.get((spec.block_m, spec.block_n))
            assert expected is None or spec.multicast_on_a == expected
        else:
            assert not spec.multicast_on_a


def test_contiguous_long_k_shapes_share_b_and_short_k_ones_do_not():
    # NOTES (bench/NOTES.md q5): the contiguous layout takes the plain GEMM's cost model.
    long_k = select("m_grouped_fp8_gemm_nt_contiguous", 8192, 4096, 7168, 4)
    assert (long_k.block_m, long_k.num_tma_multicast, long_k.multicast_on_a) == (128, 2, False)
    assert select("m_grouped_fp8_gemm_nt_contiguous", 8192, 7168, 2048, 4).num_tma_multicast == 1
    assert select("m_grouped_fp8_gemm_nt_masked", 256, 4096, 7168, 32).num_tma_multicast == 1


@pytest.mark.parametrize("rows_per_group", [256, 384, 512, 2048])
def test_contiguous_groups_of_many_rows_take_192_column_tiles_and_small_groups_256(
        rows_per_group):
    # NOTES (bench/NOTES.md session 30, j4): 128x192 beat 128x256 where groups average 512
    # rows or more, 128x256 won with groups of a few m-blocks.
    groups = 32768 // rows_per_group
    spec = select("m_grouped_fp8_gemm_nt_contiguous", 32768, 4096, 7168, groups)
    long_groups = rows_per_group >= hopper_fp8.CONTIGUOUS_LONG_GROUP_ROWS
    assert (spec.block_m, spec.block_n) == ((128, 192) if long_groups else (128, 256))


def test_long_k_large_shapes_use_clusters_and_short_k_or_one_wave_shapes_do_not():
    # NOTES (bench/NOTES.md v16): sharing B on 128x256 tiles paid at K >= 7168 only.
    long_k = select("fp8_gemm_nt", 4096, 7168, 16384)
    assert (long_k.block_m, long_k.block_n, long_k.num_tma_multicast,
            long_k.multicast_on_a) == (128, 256, 2, False)
    assert select("fp8_gemm_nt", 4096, 7168, 2048).num_tma_multicast == 1
    assert select("fp8_gemm_nt", 4096, 32768, 512).num_tma_multicast == 1
    # One wave of tiles: a cluster only couples CTAs that have nothing else to wait for.
    assert all(select("fp8_gemm_nt", m, n, k).num_tma_multicast == 1
               for m in (64, 128) for n, k in DENSE_NK)


def test_a_pair_that_holds_all_of_m_shares_b_from_one_wave_at_long_k_only():
    # NOTES (bench/NOTES.md x3): with two m-blocks, a pair sharing B loads each B tile once for
    # the whole problem: +2.4..7.5% at K >= 6144 even with one wave of tiles, -1.7% at K = 1536.
    one_wave = select("fp8_gemm_nt", 200, 10240, 8192)             # 128 tiles of 128x160
    assert (one_wave.block_m, one_wave.block_n, one_wave.num_tma_multicast,
            one_wave.multicast_on_a) == (128, 160, 2, False)
    assert select("fp8_gemm_nt", 129, 10240, 8192).num_tma_multicast == 2
    assert select("fp8_gemm_nt", 256, 24576, 1536).num_tma_multicast == 1
    assert select("fp8_gemm_nt", 200, 7168, 2048).num_tma_multicast == 1
    # Three m-blocks: no pair holds M, and one wave of tiles keeps single CTAs.
    assert select("fp8_gemm_nt", 257, 10240, 8192).num_tma_multicast == 1


def test_two_64_row_m_blocks_in_one_wave_read_each_b_tile_on_adjacent_ctas():
    # NOTES (bench/NOTES.md f4, f5): with m-fastest bands, 64x64 at 128x4096xK beat 128x32.
    def tile(m, n, k):
        spec = select("fp8_gemm_nt", m, n, k)
        return spec.block_m, spec.block_n, spec.num_tma_multicast
    assert tile(128, 4096, 7168) == (64, 64, 1)
    assert tile(100, 3584, 18944) == (64, 56, 1)
    # The rule needs exactly two m-blocks, one wave and the plain GEMM.
    assert tile(129, 4096, 7168)[0] == 128                        # three 64-row m-blocks
    assert tile(128, 7168, 16384)[0] == 128                       # 64x112 would be one wave,
                                                                  # but the model keeps 128x64


def test_the_two_m_block_rule_moves_only_one_wave_plain_gemms(monkeypatch):
    # A factor near zero makes any tile the rule covers the pick: the plain GEMM's one-wave
    # 64-row tiles over two m-blocks, and nothing of the grouped layouts or of other M.
    def first(gemm_type, m, n, k, groups=1):
        return hopper_fp8.ranked_tiles(gemm_type, m, n, k, groups, 132)[0]
    cases = [("normal", 128, 7168, 16384), ("normal", 64, 4096, 7168),
             ("normal", 129, 4096, 7168), ("normal", 128, 32768, 4096),
             ("grouped_contiguous", 128, 4096, 7168), ("grouped_masked", 96, 4096, 7168, 2)]
    before = [first(*case) for case in cases]
    monkeypatch.setattr(hopper_fp8, "TWO_M_BLOCKS_FACTOR", 0.01)
    after = [first(*case) for case in cases]
    assert after[0][0] == 64 and after[0] != before[0]           # one wave: 64x112
    assert after[1:] == before[1:]


def test_masked_pick_does_not_hinge_on_expected_m_exactly():
    # expected_m is a hint; the pick is scored over 0.7..1.3 x of it, so nearby hints agree.
    picks = {select("m_grouped_fp8_gemm_nt_masked", m, 4096, 7168, num_groups=1).block_n
             for m in (1000, 1024, 1050)}
    assert len(picks) == 1


def _drawn_masked_waves(expected_m, groups, block_m, n_tiles, num_sms, draws=4000):
    """masked_waves by sampling: groups' rows drawn uniformly from the assumed spread."""
    import random
    rng = random.Random(7)
    lo = max(1, int(expected_m * hopper_fp8.MASKED_ROW_SPREAD[0]))
    hi = max(lo, int(expected_m * hopper_fp8.MASKED_ROW_SPREAD[1]))
    total = 0.0
    for _ in range(draws):
        rows = [rng.randint(lo, hi) for _ in range(groups)]
        blocks = sum(-(-r // block_m) for r in rows)
        waves = -(-blocks * n_tiles // num_sms)
        full = min(waves, -(-(blocks - groups) * n_tiles // num_sms))
        fixed = hopper_fp8.MASKED_TILE_FIXED
        fills = [fixed + (1 - fixed) * (-(-(r - (-(-r // block_m) - 1) * block_m) // 64) * 64
                                        / block_m) for r in rows]
        total += full + (waves - full) * sum(fills) / groups
    return total / draws


@pytest.mark.parametrize("expected_m,groups,block_m,n_tiles", [
    (256, 8, 192, 32), (256, 8, 128, 26), (1024, 1, 128, 32), (64, 32, 128, 16),
    (128, 16, 192, 56), (128, 17, 192, 56), (192, 64, 128, 20), (8, 128, 64, 32),
    (1024, 4, 64, 20), (1024, 8, 64, 20), (4096, 16, 128, 7)])
def test_masked_waves_follow_the_sum_over_independently_drawn_groups(
        expected_m, groups, block_m, n_tiles):
    # Exact for few groups and few m-block counts, a normal approximation beyond: both agree
    # with sampling.
    expected = _drawn_masked_waves(expected_m, groups, block_m, n_tiles, 132)
    assert hopper_fp8.masked_waves(expected_m, groups, block_m, n_tiles, 132) == pytest.approx(
        expected, rel=0.02)


def test_masked_row_distribution_sums_to_one():
    for args in ((256, 8, 192), (256, 64, 128), (1, 128, 64), (4096, 2, 64)):
        dist, fill = hopper_fp8._masked_m_blocks(*args)
        assert sum(p for _, p in dist) == pytest.approx(1.0, abs=1e-6)
        assert 0 < fill <= 1


def test_masked_picks_measured_faster_under_the_summed_waves():
    # NOTES (session 31, j6 and k1, H200): 2 x 512 and 1 x 1024 rows at 4096x7168 ran 1.13x /
    # 1.11x faster in 128x160 than in 192x128, which the per-group spread had picked; 32 groups
    # of 192 rows at 5120x1408 1.08x faster in 128x256.
    kind = "m_grouped_fp8_gemm_nt_masked"
    assert (select(kind, 512, 4096, 7168, 2).block_m, select(kind, 512, 4096, 7168, 2).block_n) \
        == (128, 160)
    assert (select(kind, 1024, 4096, 7168, 1).block_m,
            select(kind, 1024, 4096, 7168, 1).block_n) == (128, 160)
    assert (select(kind, 192, 5120, 1408, 32).block_m,
            select(kind, 192, 5120, 1408, 32).block_n) == (128, 256)


def test_masked_groups_that_may_outgrow_64_rows_get_taller_tiles_offered():
    # NOTES (v25): groups of 45..82 rows at expected_m = 64 ran 1.2..1.4x faster in 128-row
    # tiles; a 64-row tile splits every group past 64 rows in two. A dense M of 64 is exact.
    def block_ms(kind, m, groups):
        return {tile[0] for tile in hopper_fp8.ranked_tiles(
            heuristics.GEMM_TYPES[kind], m, 4096, 7168, groups, 132)}
    assert 128 in block_ms("m_grouped_fp8_gemm_nt_masked", 64, 32)
    assert block_ms("m_grouped_fp8_gemm_nt_masked", 48, 32) == {64}
    assert block_ms("fp8_gemm_nt", 64, 1) == {64}
    assert 192 in block_ms("m_grouped_fp8_gemm_nt_masked", 128, 8)
    assert 192 not in block_ms("fp8_gemm_nt", 128, 1)


def test_256_column_tiles_need_six_k_blocks():
    # NOTES (v18, v25): 4 K blocks do not amortise a 256-wide tile's epilogue, 6 do.
    def widths(k):
        return {tile[1] for tile in hopper_fp8.ranked_tiles("normal", 4096, 32768, k, 1, 132)}
    assert 256 not in widths(512) and 256 not in widths(640)
    assert 256 in widths(768)


def test_widths_with_few_scale_split_points_pay_no_select_penalty():
    # The kernel compiles its loop once per n_start % 128 where that takes <= 4 values
    # (kStaticSplit); other straddling widths still choose each column's scale at run time.
    assert [n for n in range(8, 257, 8) if hopper_fp8.static_scale_split(n)] == [96, 160, 192, 224]
    per_column = {n: hopper_fp8.tile_cycles(128, n, 128 * 64) / n for n in (88, 96, 104)}
    assert per_column[96] < per_column[88] and per_column[96] < per_column[104]


def test_a_one_wave_medium_m_shape_takes_the_192_wide_tile():
    # NOTES (p1): 511x6144x16384 ran 0.77 of DeepGEMM at the old pick 128x96 (two waves) and
    # 0.94..0.96 at 128x192 (one wave) once its scale split was a constant.
    assert hopper_fp8.ranked_tiles("normal", 511, 6144, 16384, 1, 132)[0] == (128, 192, 1)


def test_wide_128_row_tiles_cost_less_per_column_from_six_k_blocks():
    # NOTES (d5, d6): on the fit part's 1..3-wave rows 128x160 ran a K block in ~0.87x and
    # 128x192 in ~1.0x the time of 192x128; the picks that moved gained at K >= 1536 and lost
    # 5..22% at K = 512. So 5.75 clk per column from 6 K blocks on, 6.25 below.
    def per_column_k_block(block_n, k_blocks):
        one, two = (hopper_fp8.tile_cycles(128, block_n, 128 * kb) for kb in (k_blocks, k_blocks + 1))
        return (two - one) / block_n
    for block_n in (160, 192):
        assert per_column_k_block(block_n, 8) == pytest.approx(5.75)
        assert per_column_k_block(block_n, 4) == pytest.approx(6.25)
    # The worst broad row of session 17 (192x128, 0.87 of DeepGEMM; 128x160 0.98 in d6) and a
    # K = 512 shape that keeps 192x128 (1.08..1.21 against 0.93..1.03 for the wide tiles).
    assert hopper_fp8.ranked_tiles("normal", 1024, 5120, 8192, 1, 132)[0] == (128, 160, 1)
    assert hopper_fp8.ranked_tiles("normal", 777, 32768, 512, 1, 132)[0] == (192, 128, 1)


@pytest.mark.parametrize("block_n, rows", [(128, 1), (64, 1), (120, 2), (160, 2), (256, 2)])
def test_each_k_block_reserves_two_slots_of_staged_b_scales_per_row_a_tile_touches(block_n, rows):
    # Two K blocks more (the staged tiles after the scales are 16-byte aligned).
    grown = hopper_fp8.smem_plan(128, block_n, 7168 + 256, 4)
    assert grown - hopper_fp8.smem_plan(128, block_n, 7168, 4) == 2 * 2 * rows * 4


def test_hopper_specs_target_sm_90a_with_the_requested_sm_count():
    spec = select("fp8_gemm_nt", 64, 2112, 7168, num_sms=78)
    assert (spec.arch, spec.num_sms, spec.kernel) == ("sm_90a", 78, "fp8_gemm")


def test_other_archs_get_the_portable_kernel():
    spec = select("fp8_gemm_nt", 64, 2112, 7168, arch="sm_86")
    assert (spec.kernel, spec.arch, spec.header) == ("fp8_gemm_portable", "sm_86",
                                                     "dgemm/fp8_gemm_portable.cuh")


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_maps_to_its_gemm_type_in_the_cpp_instance(kind):
    spec = select(kind, 128, 4096, 7168, num_groups=2)
    assert CPP_GEMM_TYPE[spec.gemm_type] in spec.cpp_instance()


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="fp8_gemm_tn"), "unknown kernel kind"),
    (dict(m=0), "m must be a positive int"),
    (dict(n=-5), "n must be a positive int"),
    (dict(k=100), "k must be a multiple of 128"),
    (dict(k=128.0), "k must be a positive int"),
    (dict(num_groups=True), "num_groups must be a positive int"),
    (dict(num_sms=0), "num_sms must be a positive int"),
    (dict(arch="sm_75"), "arch must be sm_80 or newer"),
    (dict(arch="hopper"), "arch must be sm_80 or newer"),
])
def test_bad_inputs_raise_value_error(kwargs, message):
    arguments = dict(kind="fp8_gemm_nt", m=128, n=4096, k=7168) | kwargs
    with pytest.raises(ValueError, match=message):
        select(**arguments)


# --- families and the tile-override hook ---------------------------------------------------------
@pytest.mark.parametrize("spec", HOPPER_SPECS[:3] + PORTABLE_SPECS[:1], ids=str)
def test_a_spec_names_its_family_and_the_family_module_launches_it(spec):
    module = kernels.family(spec.kernel)
    assert module.NAME == spec.kernel and spec.header == module.HEADER
    assert callable(module.launch) and module.ARGS.num_params >= 7


def test_an_unknown_family_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown kernel family 'fp4_gemm'"):
        kernels.family("fp4_gemm")


def test_the_portable_family_on_hopper_compiles_for_plain_sm_90():
    spec = select("fp8_gemm_nt", 128, 4096, 7168, arch="sm_90a", family=portable_fp8.NAME)
    assert (spec.kernel, spec.arch) == ("fp8_gemm_portable", "sm_90")


def test_the_hopper_family_is_refused_on_other_archs():
    with pytest.raises(ValueError, match="runs on sm_90a only"):
        select("fp8_gemm_nt", 128, 4096, 7168, arch="sm_80", family=hopper_fp8.NAME)


def test_forced_tile_replaces_the_tile_with_the_heuristic_depth_and_restores_it():
    natural = select("fp8_gemm_nt", 4096, 4096, 7168)
    with heuristics.forced_tile(128, 64, num_tma_multicast=2, multicast_on_a=False):
        forced = select("fp8_gemm_nt", 4096, 4096, 7168)
        portable = select("fp8_gemm_nt", 4096, 4096, 7168, arch="sm_80")
    assert (forced.block_m, forced.block_n, forced.num_tma_multicast, forced.multicast_on_a,
            forced.num_stages) == (128, 64, 2, False, hopper_fp8.num_stages(128, 64, 7168))
    assert portable == select("fp8_gemm_nt", 4096, 4096, 7168, arch="sm_80")
    assert select("fp8_gemm_nt", 4096, 4096, 7168) == natural


@pytest.mark.parametrize("tile, message", [((128, 100), "not a tile"), ((192, 96), "not a tile"),
                                           ((32, 64), "not a tile"),
                                           ((128, 64, 4), "num_tma_multicast must be 1 or 2")])
def test_forced_tile_refuses_tiles_the_kernel_cannot_run(tile, message):
    with pytest.raises(ValueError, match=message):
        with heuristics.forced_tile(*tile):
            pass


def test_forced_tiles_do_not_nest():
    with heuristics.forced_tile(128, 128):
        with pytest.raises(RuntimeError, match="do not nest"):
            with heuristics.forced_tile(64, 64):
                pass


# ---- 64-row tiles: even stage counts (bench/NOTES.md v23) -------------------------------------
def _suite_calls():
    """(kind, m, n, k, groups) of every call of the benches' suites, and small-M calls over K
    block counts both odd and even (64-row tiles, whose stage counts were odd before v23)."""
    from bench import suite as suites

    calls = []
    for name in suites.SUITES:
        calls += [("fp8_gemm_nt", s.m, s.n, s.k, 1) for s in suites.dense_shapes(name)]
        for case in suites.grouped_cases(name, "contiguous"):
            calls.append(("m_grouped_fp8_gemm_nt_contiguous", case.padded_m, case.n, case.k,
                          case.groups))
        for case in suites.grouped_cases(name, "masked"):
            calls.append(("m_grouped_fp8_gemm_nt_masked", case.expected_m, case.n, case.k,
                          case.groups))
    for m in (1, 4, 23, 64):
        for n in (2112, 7168, 36864):
            for k in (128, 384, 1152, 7168, 18432, 16384):
                calls.append(("fp8_gemm_nt", m, n, k, 1))
                calls.append(("m_grouped_fp8_gemm_nt_masked", m, n, k, 32))
    return calls


def test_64_row_pairs_always_get_an_even_stage_count():
    seen_pairs = seen_odd_chains = 0
    for kind, m, n, k, groups in _suite_calls():
        for spec in heuristics.candidates(kind, m, n, k, groups, count=10 ** 6):
            if spec.block_m != 64:
                continue
            if hopper_fp8.runs_pair(64, spec.block_n, spec.k, spec.num_stages):
                seen_pairs += 1
                assert spec.num_stages % 2 == 0, spec
            else:
                seen_odd_chains += spec.num_stages % 2
            spec.plan_checks()                         # accepted by the plan check
    # Chains (one warpgroup takes every stage) may run an odd ring: the depth candidates do.
    assert seen_pairs > 300 and seen_odd_chains > 10
    # These picked odd counts before v23 (and faulted): 64x144x7, 64x56x13, 64x80x11.
    assert select("fp8_gemm_nt", 4, 36864, 7168).num_stages % 2 == 0
    for block_n, k in ((144, 7168), (56, 16384), (80, 18432), (160, 7168), (64, 16384)):
        assert hopper_fp8.num_stages(64, block_n, k) % 2 == 0
        assert hopper_fp8.num_stages(64, block_n, k) <= hopper_fp8.max_stages(64, block_n, k)


@pytest.mark.parametrize("stages", [3, 7, 13])
def test_a_64_row_pair_with_an_odd_stage_count_is_refused_before_compiling(stages):
    base = select("fp8_gemm_nt", 4, 36864, 7168)
    by_hand = dataclasses.replace(base, block_m=64, block_n=144, num_stages=stages)
    with pytest.raises(ValueError, match="even stage count"):
        by_hand.plan_checks()
    from dgemm.jit import source
    with pytest.raises(ValueError, match="even stage count"):
        source.render(by_hand)                       # so no key and no compile either
    # 128-row tiles keep any depth that fits, and so do 64-row chains: up to 128 columns
    # (pipelined), or wider at up to 8 K blocks.
    dataclasses.replace(base, block_m=128, block_n=144, num_stages=stages).plan_checks()
    dataclasses.replace(base, block_m=64, block_n=128, num_stages=stages).plan_checks()
    short = select("fp8_gemm_nt", 4, 36864, 1024)
    dataclasses.replace(short, block_m=64, block_n=144, num_stages=stages).plan_checks()


def test_the_autotuner_times_the_pick_with_the_deepest_ring():
    # 128x4096x7168: the model's 64x64 with 12 stages (56 K blocks in 5 rounds), 13 fit.
    specs = heuristics.candidates("fp8_gemm_nt", 128, 4096, 7168, count=4)
    pick, deeper = specs[0], specs[4]
    assert (pick.block_m, pick.block_n, pick.num_stages) == (64, 64, 12)
    assert deeper == dataclasses.replace(pick, num_stages=13)
    assert hopper_fp8.max_stages(64, 64, 7168) == 13
    assert len(specs) == 6 and specs[5].k_split == 2       # then the K-split pair
    from dgemm.autotune.tuner import tile_name
    assert (tile_name(pick), tile_name(deeper)) == ("64x64", "64x64 13st")
    deeper.plan_checks()
    # A pair keeps an even ring: one stage fewer than the deepest when that is odd.
    wide = heuristics.candidates("fp8_gemm_nt", 4, 36864, 7168, count=4)
    for spec in wide[1:]:
        if spec.block_m == 64 and spec.num_stages != hopper_fp8.num_stages(64, spec.block_n, 7168):
            assert spec.num_stages % 2 == 0 or not hopper_fp8.runs_pair(
                64, spec.block_n, 7168, spec.num_stages)
    # No candidate when the model's ring is already the deepest (128x256 at K = 7168); the
    # fifth is the 256-row tile (next test).
    big = heuristics.candidates("fp8_gemm_nt", 4096, 4096, 7168, count=4)
    assert hopper_fp8.depth_candidate(big[0]) is None and len(big) == 5
    assert big[4].block_m == 256
    assert heuristics.candidates("fp8_gemm_nt", 128, 4096, 7168, count=0) == []


def test_the_autotuner_times_a_256_row_tile_beside_large_m_picks():
    # 16384x2112x7168: 17 n-blocks of 128 (2176 columns) against 9 of 256 (2304); 64 x 17
    # tiles are 8 waves and more, so the pair shares A.
    specs = heuristics.candidates("fp8_gemm_nt", 16384, 2112, 7168, count=4)
    tall = specs[-1]
    assert (tall.block_m, tall.block_n, tall.num_tma_multicast, tall.multicast_on_a,
            tall.k_split) == (256, 128, 2, True, 1)
    assert tall.num_stages == 3 and hopper_fp8.num_stages(256, 128, 7168) == 3
    assert hopper_fp8.smem_bytes(tall) <= hopper_fp8.SMEM_CAPACITY
    assert hopper_fp8.math_threads(256) == 256
    tall.plan_checks()
    from dgemm.autotune.tuner import tile_name
    assert tile_name(tall) == "256x128 x2A"
    # One wave of them: no cluster (the model's rule for clusters).
    few = heuristics.candidates("fp8_gemm_nt", 1024, 4096, 7168, count=4)[-1]
    assert (few.block_m, few.num_tma_multicast) == (256, 1)
    # Not below TALL_MIN_M rows, not for 64-row picks, not for the grouped layouts.
    for m in (128, hopper_fp8.TALL_MIN_M - 1):
        assert all(s.block_m != 256 for s in heuristics.candidates("fp8_gemm_nt", m, 4096, 7168))
    for kind, groups in (("m_grouped_fp8_gemm_nt_contiguous", 4),
                         ("m_grouped_fp8_gemm_nt_masked", 4)):
        assert all(s.block_m != 256 for s in heuristics.candidates(kind, 4096, 4096, 7168,
                                                                   groups))
    # The model never picks it.
    assert all(select("fp8_gemm_nt", m, n, 7168).block_m != 256
               for m in (512, 4096, 16384) for n in (1536, 2112, 4096, 7168))


def test_256_row_tiles_run_the_plain_gemm_only():
    base = select("fp8_gemm_nt", 4096, 4096, 7168)
    for block_n in (64, 96, 128):
        hopper_fp8.with_tile(base, 256, block_n, 2, multicast_on_a=True).plan_checks()
    for block_n in (48, 80, 112, 136, 256):
        with pytest.raises(ValueError, match="256-row tile takes block_n in"):
            hopper_fp8.with_tile(base, 256, block_n)
    with pytest.raises(ValueError, match="K-split pairs run 128-row tiles"):
        hopper_fp8.with_tile(base, 256, 128, k_split=2)
    contiguous = select("m_grouped_fp8_gemm_nt_contiguous", 4096, 4096, 7168, 8)
    with pytest.raises(ValueError, match="pads each group to 128 rows"):
        hopper_fp8.with_tile(contiguous, 256, 128).plan_checks()
    masked = select("m_grouped_fp8_gemm_nt_masked", 256, 4096, 7168, 8)
    with pytest.raises(ValueError, match="256-row tiles run the plain GEMM only"):
        hopper_fp8.with_tile(masked, 256, 128).plan_checks()


def test_clusters_sharing_b_compile_for_the_contiguous_layout_and_are_refused_for_masked():
    contiguous = select("m_grouped_fp8_gemm_nt_contiguous", 4096, 4096, 7168, 8)
    sharing_b = hopper_fp8.with_tile(contiguous, 128, 192, 2, multicast_on_a=False)
    sharing_b.plan_checks()
    masked = select("m_grouped_fp8_gemm_nt_masked", 256, 4096, 7168, 8)
    with pytest.raises(ValueError, match="masked layout's 2-CTA clusters share A"):
        hopper_fp8.with_tile(masked, 128, 192, 2, multicast_on_a=False).plan_checks()
    hopper_fp8.with_tile(masked, 128, 128, 2, multicast_on_a=True).plan_checks()


def test_k_split_pairs_plan_two_ctas_per_tile_and_half_the_b_scales():
    base = select("fp8_gemm_nt", 128, 4096, 7168)
    pair = hopper_fp8.with_tile(base, 128, 64, k_split=2)
    pair.plan_checks()
    assert pair.cluster_dim == 2 and pair.k_split == 2
    # One pair per tile: 64 tiles of 128x64 take 128 CTAs, and never more than the SMs.
    assert hopper_fp8.grid_size(pair, 128) == 128
    assert hopper_fp8.grid_size(pair, 4096) == 132
    assert hopper_fp8.grid_size(dataclasses.replace(pair, num_sms=131), 4096) == 130
    # Each CTA walks 28 of the 56 K blocks: its stages and B-scale slots are planned for 28.
    assert pair.num_stages == hopper_fp8.num_stages(128, 64, 7168 // 2)
    assert (hopper_fp8.smem_plan(128, 64, 7168, 7, k_split=2) ==
            hopper_fp8.smem_plan(128, 64, 7168 // 2, 7) + 4 * 8)
    # A 128-column tile stores 64 columns per CTA through TMA; a 64-column one 32 (checked).
    assert hopper_fp8.uses_tma_store(hopper_fp8.with_tile(base, 128, 128, k_split=2))
    assert not hopper_fp8.uses_tma_store(pair)
    from bench.suite import config_name
    assert config_name(pair) == "128x64x7/ks2"
    # k_split=1 leaves every existing spec as it was (the field defaults to 1).
    assert base.k_split == 1 and base.cluster_dim == base.num_tma_multicast
    assert KernelSpec.from_json(base.to_json()) == base


def test_the_autotuner_times_a_k_split_pair_that_the_model_never_picks():
    # Long K and few tiles: the pair fitting one wave that the model rates fastest at K/2.
    specs = heuristics.candidates("fp8_gemm_nt", 128, 2304, 16384, count=4)
    assert [s.k_split for s in specs][:4] == [1, 1, 1, 1] and specs[-1].k_split == 2
    assert (specs[-1].block_m, specs[-1].block_n, specs[-1].cluster_dim) == (128, 48, 2)
    assert hopper_fp8.grid_size(specs[-1], 128) == 2 * 48            # 48 tiles, 96 CTAs
    for m, n, k in ((128, 2304, 16384), (128, 4096, 7168), (1, 6144, 4096), (4096, 4096, 7168)):
        assert select("fp8_gemm_nt", m, n, k).k_split == 1
    # Not for grouped layouts, odd K block counts, short K or pairs that need a second wave.
    assert all(s.k_split == 1 for s in heuristics.candidates(
        "m_grouped_fp8_gemm_nt_masked", 64, 2304, 16384, num_groups=4, count=4))
    for m, n, k in ((128, 2304, 16256), (128, 2304, 3968), (4096, 4096, 7168)):
        assert all(s.k_split == 1 for s in heuristics.candidates("fp8_gemm_nt", m, n, k))
    assert heuristics.candidates("fp8_gemm_nt", 128, 2304, 16384, count=0) == []


@pytest.mark.parametrize("tile,match", [
    ((64, 64, 1, True, 2), "128-row tiles"), ((128, 64, 2, True, 2), "without multicast"),
    ((128, 40, 1, True, 2), "multiple of 16"), ((128, 64, 1, True, 3), "k_split must be 1 or 2")])
def test_k_split_pairs_refuse_tiles_they_cannot_run(tile, match):
    base = select("fp8_gemm_nt", 128, 4096, 7168)
    with pytest.raises(ValueError, match=match):
        hopper_fp8.with_tile(base, *tile)
    with pytest.raises(ValueError, match=match):
        with heuristics.forced_tile(*tile):
            pass


def test_k_split_pairs_are_refused_for_grouped_layouts_and_odd_k_blocks():
    for kind, groups in (("m_grouped_fp8_gemm_nt_masked", 4),
                         ("m_grouped_fp8_gemm_nt_contiguous", 4)):
        grouped = select(kind, 256, 4096, 7168, groups)
        with pytest.raises(ValueError, match="K-split pairs"):
            hopper_fp8.with_tile(grouped, 128, 64, k_split=2).plan_checks()
    odd = select("fp8_gemm_nt", 128, 4096, 384)                       # 3 K blocks
    with pytest.raises(ValueError, match="even number"):
        hopper_fp8.with_tile(odd, 128, 64, k_split=2).plan_checks()


@pytest.mark.parametrize("spec", [select("fp8_gemm_nt", 128, 4096, 7168, arch="sm_80"),
                                  select("fp8_gemm_nt_wgrad", 7168, 2112, 4096),
                                  select("fp8_gemm_nt_wgrad", 7168, 2112, 4096, arch="sm_80")],
                         ids=lambda s: s.kernel)
def test_families_without_k_split_pairs_refuse_a_k_split_spec(spec):
    spec.plan_checks()
    with pytest.raises(ValueError, match="runs no K-split pairs"):
        dataclasses.replace(spec, k_split=2).plan_checks()


def test_reports_name_k_split_pairs():
    from dgemm.autotune.tuner import tile_name
    pair = heuristics.candidates("fp8_gemm_nt", 128, 2304, 16384, count=1)[-1]
    assert tile_name(pair) == "128x48 ks2"


def test_a_contiguous_tile_taller_than_the_group_padding_is_refused():
    contiguous = select("m_grouped_fp8_gemm_nt_contiguous", 4096, 4096, 7168, 8)
    with pytest.raises(ValueError, match="would span two groups"):
        hopper_fp8.with_tile(contiguous, 192, 128).plan_checks()
    hopper_fp8.with_tile(contiguous, 64, 128).plan_checks()
