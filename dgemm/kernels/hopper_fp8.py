"""The sm_90a FP8 GEMM family (csrc/dgemm/fp8_gemm.cuh): TMA loads, WGMMA, warp specialisation,
a persistent grid, optional 2-CTA clusters sharing one operand through TMA multicast or, for the
plain GEMM, splitting each tile's K blocks (K-split pairs, an autotuner candidate only).

Everything Python knows about that kernel lives here: which tile a problem gets (a cost model
fitted to H200 sweeps, bench/NOTES.md), the template arguments, the thread count, the shared
memory plan, the TMA descriptors, the grid and the launch. The plan is checked against the
header at compile time (`plan_checks`: `dgemm::Fp8GemmPlanCheck`), so the two cannot drift.
Selection is pure Python and GPU-free, so a CPU-only prewarm host computes exactly the specs (and
keys) a GPU rank will ask for.
"""
from __future__ import annotations

import ctypes
import functools
import math
import sys

import torch

from ..jit import state
from ..utils import align, ceil_div, is_mn_major_tma_aligned
from ..jit.args import ArgLayout, TmaDescriptor
from . import plans
from .loader import current_stream, get_kernel
from .spec import CPP_GEMM_TYPE, KernelSpec, cpp_bool

NAME = "fp8_gemm"
HEADER = "dgemm/fp8_gemm.cuh"
ARCHS = ("sm_90a",)                # wgmma and TMA multicast exist only in the arch target
BLOCK_K = 128                      # one FP8 scale block along K; fixed by the scaling recipe
CONTIGUOUS_ALIGNMENT = 128         # rows of each group of the contiguous layout are padded to it
SMEM_CAPACITY = 232_448            # bytes of dynamic shared memory one sm_90 CTA may use
PRODUCER_THREADS = 128             # one TMA producer warpgroup
STAGED_TILE_BYTES = 64             # one tile as the loader warp stages it (StagedTile)


# ------------------------------------------------------------------------------------------
# The plan: threads and shared memory (checked against fp8_gemm.cuh at compile time)
# ------------------------------------------------------------------------------------------
def math_threads(block_m: int) -> int:
    """WGMMA warpgroups: 64 rows each (block_m 128, 192), two 64-row waves each (block_m
    256) or two on alternate stages (block_m 64). Header: `fp8_gemm_math_threads`."""
    return 384 if block_m == 192 else 256


def num_threads(spec: KernelSpec) -> int:
    return PRODUCER_THREADS + math_threads(spec.block_m)


def runs_pair(block_m: int, block_n: int, k: int, num_stages: int) -> bool:
    """Whether a tile's two math warpgroups split its K blocks by stage parity (a pair) rather
    than warpgroup 0 taking every stage (a chain). Header: `kSplitK and not kOneChain`."""
    pipelined = block_n <= 128 and num_stages >= 2
    return block_m == 64 and not pipelined and ceil_div(k, BLOCK_K) > 8


def smem_plan(block_m: int, block_n: int, k: int, num_stages: int, k_split: int = 1) -> int:
    """Dynamic shared memory of one CTA (of a K-split pair: `k_split` 2); header:
    `fp8_gemm_smem(...).total`."""
    pitch = block_n * 2 + (16 if block_n % 16 == 0 else 0)   # bank-conflict-free bf16 rows
    smem_d = block_m * pitch
    smem_a = block_m * BLOCK_K                            # fp8, 128B-swizzled rows of 128 B
    smem_b = block_n * BLOCK_K
    smem_scales_a = block_m * 4
    barriers = num_stages * 2 * 8 + 4 * 8               # + B-scale slots' full/empty
    if k_split > 1:
        barriers += 4 * 8                               # + the exchange's full/free per warpgroup
    # Two slots of a tile's B scales: this CTA's K/128 floats per 128-column scale block it
    # touches.
    scales_b = 2 * (ceil_div(k, BLOCK_K) // k_split) * (1 if BLOCK_K % block_n == 0 else 2) * 4
    end = smem_d + num_stages * (smem_a + smem_b + smem_scales_a) + barriers + scales_b
    # Two staged tiles (StagedTile, 64 bytes each), 16-byte aligned.
    return align(end, 16) + 2 * STAGED_TILE_BYTES


def smem_bytes(spec: KernelSpec) -> int:
    return smem_plan(spec.block_m, spec.block_n, spec.k, spec.num_stages, spec.k_split)


def uses_tma_store(spec: KernelSpec) -> bool:
    """D goes out through TMA stores (16-byte output rows, tiles of whole 64-column swizzle
    chunks; grouped layouts: the warpgroups whose 64 rows are all real output rows; a CTA of a
    K-split pair stores half of the tile's columns). Header: `fp8_gemm_tma_store`."""
    return spec.n % 8 == 0 and (spec.block_n // spec.k_split) % 64 == 0


def template_args(spec: KernelSpec) -> tuple:
    return (CPP_GEMM_TYPE[spec.gemm_type], spec.n, spec.k, spec.num_groups, spec.block_m,
            spec.block_n, spec.block_k, spec.num_stages, spec.num_tma_multicast,
            cpp_bool(spec.multicast_on_a), spec.num_sms, math_threads(spec.block_m),
            spec.k_split)


def cpp_instance(spec: KernelSpec) -> str:
    return "dgemm::fp8_gemm_kernel<" + ", ".join(str(a) for a in template_args(spec)) + ">"


def plan_checks(spec: KernelSpec) -> str:
    # Every source, key and compile of this family passes here: a spec the kernel refuses
    # (e.g. built by hand, or read from an old manifest) fails here with the fix in its message
    # instead of in the compiler. NOTES: 64-row tiles with an odd stage count faulted before
    # kernel v23 (bench/NOTES.md v23); the header now refuses them too.
    check_tile(spec.block_m, spec.block_n, spec.num_tma_multicast, spec.k_split)
    if spec.k_split > 1 and (spec.gemm_type != "normal" or ceil_div(spec.k, BLOCK_K) % 2):
        raise ValueError(f"K-split pairs (k_split=2) run the plain GEMM with an even number of "
                         f"128-wide K blocks; got {spec.gemm_type} at k={spec.k}: use k_split=1")
    if spec.gemm_type == "grouped_contiguous" and CONTIGUOUS_ALIGNMENT % spec.block_m:
        raise ValueError(f"the contiguous layout pads each group to {CONTIGUOUS_ALIGNMENT} rows: a "
                         f"{spec.block_m}-row tile would span two groups; use block_m 64 or 128")
    if spec.block_m == 256 and spec.gemm_type != "normal":
        raise ValueError(f"256-row tiles run the plain GEMM only; got {spec.gemm_type}: use "
                         f"block_m 64, 128 or 192")
    if spec.gemm_type == "grouped_masked" and spec.num_tma_multicast > 1 and \
            not spec.multicast_on_a:
        raise ValueError("the masked layout's 2-CTA clusters share A (multicast_on_a=True): a "
                         "pair sharing B would need both m-blocks in one group")
    if runs_pair(spec.block_m, spec.block_n, spec.k, spec.num_stages) and spec.num_stages % 2:
        raise ValueError(f"{spec.block_m}x{spec.block_n} tiles at k={spec.k} run a pair of math "
                         f"warpgroups that own alternate stages: they need an even stage count; "
                         f"got {spec.num_stages}: use dgemm.kernels.hopper_fp8.num_stages() or "
                         f"with_tile()")
    args = (spec.n, spec.k, spec.block_m, spec.block_n, spec.block_k, spec.num_stages,
            smem_bytes(spec), num_threads(spec), cpp_bool(uses_tma_store(spec)), spec.k_split)
    return "template struct dgemm::Fp8GemmPlanCheck<" + ", ".join(map(str, args)) + ">;"


# ------------------------------------------------------------------------------------------
# Selection: (gemm type, m, n, k, groups, SMs) -> KernelSpec
# ------------------------------------------------------------------------------------------
def max_stages(block_m: int, block_n: int, k: int, k_split: int = 1) -> int:
    """Deepest pipeline (3..16 stages) that fits shared memory, or 0: more bytes in flight hide
    TMA latency on the small-M shapes."""
    return max((s for s in range(3, 17)
                if smem_plan(block_m, block_n, k, s, k_split) <= SMEM_CAPACITY), default=0)


@functools.lru_cache(maxsize=8192)     # pure, M-independent: asked for every tile selected
def num_stages(block_m: int, block_n: int, k: int, k_split: int = 1) -> int:
    """Pipeline depth for a tile, or 0 if none fits: each tile walks the ring in whole rounds
    of stages (slots past the last K block go unused), so take the fewest stages that keep the
    deepest pipeline's round count: e.g. 56 K blocks with room for 5 stages -> 12 rounds -> 5,
    with room for 6 -> 10 rounds -> 6; 4 K blocks -> 4 stages. A CTA of a K-split pair
    (`k_split` 2) walks half of the K blocks."""
    deepest = max_stages(block_m, block_n, k, k_split)
    if deepest == 0:
        return 0
    k_blocks = ceil_div(k, BLOCK_K) // k_split
    # Never fewer than 3 (or the K blocks there are): with 2 the producer is one stage ahead.
    stages = max(ceil_div(k_blocks, ceil_div(k_blocks, deepest)), min(3, k_blocks))
    if block_m == 64 and stages % 2 and stages > 1:
        # The two math warpgroups of a 64-row tile own alternate stages (header: kSplitK), so
        # an even count gives them equal halves: one more if it fits and has a K block to
        # hold, else one fewer. (One stage, K = 128: the first warpgroup does it all.)
        stages = stages + 1 if stages < min(deepest, k_blocks) else stages - 1
    return stages


def block_ns(block_m: int) -> tuple:
    """Tile widths offered to `block_m`-row tiles."""
    # Multiples of 8 (WGMMA's N granularity); the cap keeps accumulators in registers (192:
    # 96 + 96 fp32 per thread fit two math warpgroups' 232 without spills, a 256-wide
    # accumulator would not, so 256 runs as two waves of 128 (below); three
    # warpgroups get 152 each, enough for 128), and a tile may touch at most two 128-column
    # B-scale blocks (152 could touch three).
    if block_m == 192:
        # NOTES: of 96..128, only tiles inside one B-scale block ran well with three
        # warpgroups (v7 sweep: 192x120 at 0.84x the rate of 192x128).
        return (64, 128)
    narrow = tuple(n for n in range(16, 193, 8) if n + 128 - math.gcd(n, 128) <= 256)
    if block_m == 256:
        # Two 128-row waves of at most 128 columns (the registers of a 128x256 tile), with no
        # per-column B-scale select. NOTES (session 35, o1): 256x112 sharing A ran 0.77..0.86x
        # DeepGEMM's rate where 256x128 ran 0.96..1.00x.
        return (64, 96, 128)
    # 256: two 128-column waves per K block through one temporary accumulator.
    return narrow + (256,) if block_m == 128 else narrow


# K blocks from which a wide tile's per-tile cost (its epilogue) is amortised: below, 256-wide
# tiles are not offered and 160/192-wide ones keep their older per-column cost (bench/NOTES.md
# v18, d6).
WIDE_TILE_MIN_K_BLOCKS = 6


def narrow_k_block_cycles(block_n: int) -> float:
    """SM cycles of one K block of a 128-row tile up to 128 columns (the fit in `tile_cycles`'
    NOTES: ~247 + 3.9 * block_n, never below ~420)."""
    return max(420, 247 + 3.9 * block_n)


def tile_cycles(block_m: int, block_n: int, k: int, multicast: int = 1,
                full_wave: bool = True) -> float:
    """SM cycles for one output tile: K blocks x cycles per K block + per-tile cost, fitted to
    the H200 sweeps of kernel v9/v10 and v12..v16 (bench/NOTES.md; `python -m bench.bench_gemm
    --sweep`, `python -m bench.compare_tiles`).

    NOTES: per K block (~1.75 GHz), 128-row tiles took ~247 + 3.9 * block_n clk up to 128
    columns (64 -> 489, 128 -> 745 measured; never below ~420 however narrow) and ~6..7.5 clk
    per column beyond; 192-row tiles (three warpgroups) 550 + 3.65 * block_n (64 -> 784,
    128 -> 1018; refitted to 500 + 3.65 * block_n for kernel v21, below); 64-row split-K
    tiles ~280 + 3.3 * block_n. Per tile ~1200 clk (128 rows),
    ~1800 (192 rows) of fill and epilogue; 64-row tiles of the small-M shapes pay more per tile
    the wider they are (first loads from HBM). `full_wave`: the problem has at least one tile
    per SM (steady state); fewer tiles pay their first loads and epilogue unhidden."""
    k_blocks = ceil_div(k, BLOCK_K)
    if block_m == 64:
        k_block, per_tile = 280 + 3.3 * block_n, 600 + 40 * block_n
    elif block_m == 192:
        # NOTES: with kernel v21, 192x128 beat 128x256 wherever both had the same wave
        # quantization (+2..4% at M >= 1536 of the broad suite's fit part, bench/NOTES.md v22).
        k_block, per_tile = 500 + 3.65 * block_n, 1800
    else:
        if block_n == 256:
            # Two waves; ~12% fewer shared-memory bytes per FLOP than 128 columns. Fitted to
            # kernel v18 at K = 1536..7168 with several waves (bench/NOTES.md v18); less than
            # one wave keeps the v12 fit (3000 per tile), which matched those shapes.
            k_block, per_tile = (1340, 1100) if full_wave else (1385, 3000)
        else:
            # NOTES: 160 and 192 columns: 6.25 per column since the kernel's B-scale split is
            # a compile-time constant for them (p1: refitted on the broad suite's fit part; 7.0
            # with a 10% select penalty before). From 6 K blocks on, 5.75: on the fit part's
            # 1..3-wave rows a K block of 128x160 took ~0.87x and 128x192 ~1.0x the time of
            # 192x128 (the model said 1.03x and 1.24x); the picks that moved gained 0.995..1.085
            # at K >= 1536 but lost 5..22% at K = 512, where the per-tile cost rules
            # (bench/NOTES.md d5, d6).
            per_column = 5.75 if k_blocks >= WIDE_TILE_MIN_K_BLOCKS else 6.25
            k_block = (narrow_k_block_cycles(block_n) if block_n <= 128
                       else per_column * block_n)
            if 96 < block_n < 128:
                # Straddles two B-scale blocks on most tiles (per-column scale select). NOTES:
                # masked 7168x2048 at 128x112 ran 0.83x the rate of 128x128 (v12 sweep).
                k_block *= 1.12
            if BLOCK_K % block_n and not static_scale_split(block_n):
                # Widths that do not divide 128 promote with per-column scale selects (no
                # uniform-scale path). NOTES: 128x40 ran ~600 clk per K block against ~430 for
                # 128x32 (v21); over the broad suite's fit part +10% fitted best (v22).
                k_block *= 1.10
            per_tile = 1200
    if multicast > 1:
        # 2-CTA clusters sharing one operand: fewer L2 bytes and watts per K block (the H200
        # runs these shapes at its power cap, so the clock rises), but the pair waits on each
        # other at tile boundaries. NOTES: fitted to v16 (bench/NOTES.md): 128x256 sharing B
        # +0.5..3% at K >= 7168, -1% at K = 2048, -3% at K = 512.
        k_block, per_tile = k_block * 0.982, per_tile + 900
    return k_blocks * k_block + per_tile


def static_scale_split(block_n: int) -> bool:
    """The kernel compiles a 128-row tile's main loop once per B-scale split point
    (n_start % 128) for widths with at most 4 of them (multiples of 32 that do not divide
    128), so their promotion has no per-column scale select (csrc/dgemm/fp8_gemm.cuh,
    kStaticSplit)."""
    return BLOCK_K % block_n != 0 and block_n < 256 and BLOCK_K // math.gcd(block_n, BLOCK_K) <= 4


def multicast_fits(block_m: int, block_n: int, multicast: int) -> bool:
    """Each CTA of a cluster loads a slice of the shared operand's tile of whole 8-row
    (1024-byte) swizzle atoms; the header refuses other slices at compile time."""
    shared = block_m if shares_a(block_m, block_n) else block_n
    return multicast == 1 or shared % (8 * multicast) == 0


def shares_a(block_m: int, block_n: int) -> bool:
    """A cluster multicasts the operand with more rows per tile (A on ties). NOTES: 128x256
    sharing B beat sharing A; 192x128 sharing A beat sharing B by 3..7% (v16)."""
    return block_m >= block_n


def cluster_unit(multicast: int, on_a: bool) -> tuple:
    """(m-blocks, n-blocks) of one cluster tile: `multicast` n-blocks sharing A, or m-blocks
    sharing B (csrc/dgemm/scheduler.cuh)."""
    return (1, multicast) if on_a or multicast == 1 else (multicast, 1)


# Cycles of a 2-CTA cluster sharing B whose two m-blocks are all of M (ranked_tiles says why).
PAIR_HOLDS_M_FACTOR = 0.96
# Cycles of a 192-row tile whose epilogue stages D for TMA stores (N % 8 == 0). NOTES (session
# 29, i2..i5): staged with stmatrix, 192x128 ran 1.7..2.6% faster (128x256 unchanged), and
# 2.8..4.4% faster than the pick 128x256 sharing B on many-wave rows the model had rated ~1% the
# other way; of the 11 broad-suite picks this factor moves, 8 gained and 3 lost (i5).
STMATRIX_192_FACTOR = 0.98
# Cycles of a 160- or 192-wide 128-row tile in the masked layout. NOTES (session 31, on j6's
# sweep of every masked row): over the rows with full groups, per wave and output element these
# ran 1.06 (160) and 1.02 (192) x 192x128, the model says 1.165 for both; 0.92 fitted on the
# fit part (0.91..0.93 score the same; 0.94 loses two of its rows, <= 0.90 moves holdout rows).
MASKED_WIDE_FACTOR = 0.92
# Cycles of a one-wave grid of single 64-row tiles over exactly two m-blocks (ranked_tiles).
TWO_M_BLOCKS_FACTOR = 0.75
# Cycles of a 128x192 tile in the contiguous layout when its groups average at least
# CONTIGUOUS_LONG_GROUP_ROWS rows. NOTES (session 30, j3, j4): there 128x192 (sharing B at long
# K) ran 0..13% faster than the pick 128x256 on 12 of the 13 fit rows, the model having rated it
# 8..20% slower; with at most ~350 rows a group 128x256 stayed faster by 1..8% (each group two
# or three m-blocks, the last partly padding). Fitted on the fit part: the picks' time over the
# best timed tile 0.972 -> 0.988 (holdout 0.977 -> 0.994).
CONTIGUOUS_192_FACTOR = 0.85
CONTIGUOUS_LONG_GROUP_ROWS = 512

_selections = state.table("hopper_fp8.selections")
_MAX_SELECTIONS = 16384


def select(gemm_type: str, m: int, n: int, k: int, num_groups: int, num_sms: int,
           arch: str = "sm_90a") -> KernelSpec:
    """The tile for one call (memoised: pure in its arguments). `m` is the masked layout's
    expected rows per group, the other layouts' rows."""
    args = (gemm_type, m, n, k, num_groups, num_sms)
    spec = _selections.get(args)
    if spec is None:
        if len(_selections) >= _MAX_SELECTIONS:      # e.g. a warm-up over every M of a range
            _selections.clear()
        spec = _selections[args] = _select(*args)
    return spec


def ranked_tiles(gemm_type: str, m: int, n: int, k: int, num_groups: int,
                 num_sms: int) -> list:
    """Every (block_m, block_n, num_tma_multicast) the cost model allows for this call, best
    first; `select` takes the first. Benchmarks time the next few to check the model."""
    # The masked layout's m is only a hint (expected rows per group; the real counts live on
    # the device): score it over a spread of row counts (masked_waves) so that a tile count
    # that just fits one more wave at exactly expected_m does not decide. NOTES: 128x256 tiles
    # picked for expected_m = 1024 fit 128 SMs at 1024 rows but took two waves at the
    # benchmark's 0.7..1.3 x spread (0.93x of DeepGEMM, v12).
    spread = gemm_type == "grouped_masked"
    groups = num_groups if spread else 1
    k_blocks = ceil_div(k, BLOCK_K)
    # 192-row tiles would straddle the contiguous layout's 128-row group padding. A masked
    # group may hold more rows than expected_m, so its taller tiles compete from 1.25 x
    # expected_m on (the model's spread before session 31; kept, as moving it moves picks
    # unmeasured). NOTES (v25 probe): at expected_m = 64 (groups of 45..82 rows) 128-row tiles
    # ran 1.2..1.4x faster than the 64-row ones, which split most groups in two.
    tallest = m * 5 // 4 if spread else m
    block_ms = (64,) if tallest <= 64 else (64, 128) if gemm_type == "grouped_contiguous" else (
        (64, 128, 192) if tallest > 128 else (64, 128))
    ranked = []
    # Inlined integer ceilings (-(-a // b)): this loop runs for every first call at a new M.
    for block_m in block_ms:
        m_blocks = -(-m // block_m)
        for tile in _tiles(gemm_type, n, k)[block_m]:
            block_n, multicast, unit_m, n_tiles, cycles_full, cycles_part, waste, fill_a = tile
            # Whole cluster tiles: `multicast` n-blocks (sharing A) or m-blocks (sharing B).
            tiles = -(-m_blocks // unit_m) * unit_m * groups * n_tiles
            # One pair of m-blocks holds all of M: sharing B then loads each B tile once for
            # the whole problem, and B is nearly all of its bytes. NOTES: 128 < M <= 256 on
            # the broad suite's fit part, the pick's width sharing B against it alone: +2.4..
            # 7.5% at K >= 6144 (one wave of tiles included), -1.7% at K = 1536
            # (bench/NOTES.md, x3).
            pair_holds_m = unit_m > 1 and m_blocks == unit_m and gemm_type == "normal"
            # Other clusters pay only with at least two waves of them.
            if multicast > 1 and tiles < 2 * num_sms and not pair_holds_m:
                continue
            waves = -(-tiles // num_sms)
            last_wave = tiles - (waves - 1) * num_sms
            if spread:
                waves = masked_waves(m, groups, block_m, n_tiles, num_sms)
            # The slowest SM sets the time: waves x cycles per tile. Then prefer a full last
            # wave, less wasted area beyond N, the larger tile (better reuse).
            cycles = cycles_full if tiles >= num_sms else cycles_part
            if spread and block_m == 128 and 160 <= block_n <= 192:
                cycles *= MASKED_WIDE_FACTOR
            if pair_holds_m:
                cycles *= PAIR_HOLDS_M_FACTOR
            if (gemm_type == "grouped_contiguous" and block_n == 192
                    and m >= CONTIGUOUS_LONG_GROUP_ROWS * num_groups):
                cycles *= CONTIGUOUS_192_FACTOR
            # The plain GEMM's single 64-row tiles over two m-blocks (64 < M <= 128) in one
            # wave: the scheduler's m-fastest bands put the two CTAs that read each B tile
            # side by side, so B streams from HBM once at the pace of the one-wave small-M
            # shapes, which the per-K-block fit (compute pace) does not describe. NOTES (f4,
            # f5): 64x64 at 128x4096xK ran 2.5..9% faster than the pick 128x32; fitted on the
            # fit part, where all four picks that 0.75 moves gained 2.5..13% and 0.7 moved
            # three that lost 1..3%; the one holdout row it moves (96x4608x3584, 128x40 ->
            # 64x72) lost 2.3% (1.059 -> 1.035 of DeepGEMM).
            if (block_m == 64 and m_blocks == 2 and multicast == 1 and tiles <= num_sms
                    and gemm_type == "normal"):
                cycles *= TWO_M_BLOCKS_FACTOR
            # Rows of the last m-block past M that reach the SMs as TMA zero fill slow every
            # SM in the run, not only the tile's own (a shared cost, so not per wave): more
            # tiles in that m-block cost more. NOTES: at M = 16 the one-wave 64x16 tiles of
            # 16x2112x7168 ran 1.15x slower than 64x40, while at M = 64 64x16 was the fastest;
            # fitted over the broad suite's fit part: 0.05 clk per row per tile per K block
            # (v22). Since v24 only clusters sharing A (whole-tile slices) still load such
            # rows: the plain GEMM's last m-block loads its real rows alone, and grouped rows
            # past a group are in bounds.
            fill = (fill_a * (block_m - m % block_m) * k_blocks
                    if fill_a and m % block_m else 0.0)
            ranked.append(((waves * cycles + fill, -last_wave, waste, -block_n, multicast),
                           len(ranked), (block_m, block_n, multicast)))
    ranked.sort()             # ties keep the offering order (the index)
    return [tile for _, _, tile in ranked]


# The masked layout's rows per group, as a fraction of expected_m, that the cost model assumes:
# each group independently uniform over this range (the benchmarks draw the same; ranked_tiles).
MASKED_ROW_SPREAD = (0.7, 1.3)


# Share of a tile's cycles that a masked group's partly filled last m-block pays whatever its
# rows: the rest scales with the 64-row warpgroups that have rows (idle ones skip their WGMMAs,
# v13). NOTES (session 31, j6): groups of 6..48 rows (one warpgroup busy) ran 128x128 and
# 192x128 tiles in about the same time, which this share predicts at ~0.2.
MASKED_TILE_FIXED = 0.2


@functools.lru_cache(maxsize=1024)
def _masked_m_blocks(expected_m: int, groups: int, block_m: int) -> tuple:
    """(((m-blocks of all groups together, probability), ...), mean work of a tile relative to
    a full one), every group's rows drawn independently from MASKED_ROW_SPREAD x expected_m.
    The sum is exact while groups x (values of one group's m-blocks) <= 64, a normal
    approximation beyond (cheap for 128 groups or a large expected_m)."""
    lo = max(1, int(expected_m * MASKED_ROW_SPREAD[0]))
    hi = max(lo, int(expected_m * MASKED_ROW_SPREAD[1]))
    one, work = {}, 0.0
    for rows in range(lo, hi + 1):     # at most ~0.6 x expected_m values
        blocks = -(-rows // block_m)
        one[blocks] = one.get(blocks, 0) + 1
        last = rows - (blocks - 1) * block_m
        work += MASKED_TILE_FIXED + (1 - MASKED_TILE_FIXED) * (-(-last // 64) * 64 / block_m)
    count = hi - lo + 1
    one = {b: c / count for b, c in one.items()}
    fill = work / count
    if groups == 1:
        return tuple(one.items()), fill
    if groups * len(one) <= 64:         # the convolution's cost grows as their square
        total = {0: 1.0}
        for _ in range(groups):
            step = {}
            for s, p in total.items():
                for b, q in one.items():
                    step[s + b] = step.get(s + b, 0.0) + p * q
            total = step
        return tuple(total.items()), fill
    mean = sum(b * q for b, q in one.items())
    sd = math.sqrt(max(0.0, sum(b * b * q for b, q in one.items()) - mean * mean) * groups)
    mean *= groups
    if sd < 0.5:
        return ((round(mean), 1.0),), fill
    cdf = lambda x: 0.5 * (1.0 + math.erf((x - mean) / (sd * math.sqrt(2.0))))
    points = range(max(0, math.floor(mean - 4 * sd)), math.ceil(mean + 4 * sd) + 1)
    dist = [(s, cdf(s + 0.5) - cdf(s - 0.5)) for s in points]
    norm = sum(p for _, p in dist)     # what lies beyond 4 sd
    return tuple((s, p / norm) for s, p in dist), fill


def masked_waves(expected_m: int, groups: int, block_m: int, n_tiles: int, num_sms: int) -> float:
    """Expected waves of the masked layout's tiles, counted in full tiles. The scheduler walks
    the groups' real m-blocks one after the other (csrc/dgemm/scheduler.cuh), so the waves
    follow the sum over the groups, whose spread is far narrower than one group's. NOTES
    (session 31): before, every group was scored at the same 0.75 / 1 / 1.25 x expected_m,
    with 192-row tiles x 0.9 for their idle warpgroups; on 30 shapes no suite holds that this
    model picks differently, its picks ran 1.072x faster (geomean; 27 faster, k1)."""
    dist, fill = _masked_m_blocks(expected_m, groups, block_m)
    total = 0.0
    for blocks, p in dist:
        waves = -(-blocks * n_tiles // num_sms)
        # Each group has one last, partly filled m-block; the others are full. The slowest SM
        # holds its share of the full tiles (spread evenly), the rest of its waves are last
        # m-blocks.
        full = min(waves, -(-(blocks - groups) * n_tiles // num_sms))
        total += p * (full + (waves - full) * fill)
    return total


@functools.lru_cache(maxsize=4096)
def _tiles(gemm_type: str, n: int, k: int) -> dict:
    """{block_m: the tiles `ranked_tiles` may offer, with what of their score does not depend
    on M}: (block_n, multicast, cluster m-blocks, n-tiles, cycles per tile with a full wave
    and with less, columns wasted past N, zero-fill coefficient or 0). Memoised: a warm-up
    selects for thousands of M with the same N and K."""
    # Clusters of 2 CTAs share the tile's larger operand through TMA multicast (A: adjacent
    # n-blocks of one m-block; B: adjacent m-blocks of one n-block). They pay only on long K
    # (cost model above). The contiguous layout takes the plain GEMM's cost model: with
    # clusters sharing B (a pair in two groups loads B each, kernel q1) it picks 128x256 sharing
    # B at K >= 7168, measured 0.978 -> 0.986 of DeepGEMM over the suite's contiguous shapes,
    # +2..13% where it changes except one at -1.8% (bench/NOTES.md q5). The masked layout keeps
    # single CTAs (no gain measured, v12; it cannot share B).
    multicasts = (1, 2) if gemm_type in ("normal", "grouped_contiguous") else (1,)
    # NOTES: 256-column tiles lost at K = 512 at every M measured (128x32768x512: 0.89x the
    # rate of 128x128; 4096x32768x512: 0.92x of 192x128, bench/NOTES.md v18): with 4 K blocks
    # the 64 KB epilogue of each tile is not amortised; at K = 768 (6 K blocks) it is
    # (contiguous 128 x 256 rows, 2048x768: 128x256 1.21x the rate of 128x128, v25 probe).
    # 136 and 144 wide 128-row tiles measured below 128 on 4 of 6 large shapes (v4 sweep);
    # only the clearly wider 160 and 192 pay for their extra width there.
    wide_ok = ceil_div(k, BLOCK_K) >= WIDE_TILE_MIN_K_BLOCKS
    table = {}
    for block_m in (64, 128, 192):
        table[block_m] = tiles = []
        for block_n in block_ns(block_m):
            if not (block_m == 64 or block_n <= 128 or (
                    block_n >= 160 and (block_n < 256 or wide_ok))):
                continue
            for multicast in multicasts:
                if not multicast_fits(block_m, block_n, multicast) or not num_stages(
                        block_m, block_n, k):
                    continue
                on_a = shares_a(block_m, block_n)
                unit_m, unit_n = cluster_unit(multicast, on_a)
                n_blocks = ceil_div(n, block_n)
                fill_a = (0.05 * n_blocks if gemm_type == "normal" and multicast > 1 and on_a
                          else 0.0)
                factor = STMATRIX_192_FACTOR if block_m == 192 and n % 8 == 0 else 1.0
                tiles.append((block_n, multicast, unit_m, ceil_div(n_blocks, unit_n) * unit_n,
                              factor * tile_cycles(block_m, block_n, k, multicast, True),
                              factor * tile_cycles(block_m, block_n, k, multicast, False),
                              n_blocks * block_n - n, fill_a))
    return table


def candidates(gemm_type: str, m: int, n: int, k: int, num_groups: int, num_sms: int,
               count: int) -> list:
    """The cost model's `count` best specs for this call, best (the pick of `select`) first,
    one per tile shape while there are more shapes (`distinct_shapes_first`), then what an
    autotuner should time beside them that the model cannot rank: the pick with the deepest
    ring (`depth_candidate`), the 256-row tile (`tall_candidate`) and the K-split pair
    (`k_split_candidate`)."""
    ranked = distinct_shapes_first(ranked_tiles(gemm_type, m, n, k, num_groups, num_sms))
    specs = [_spec(gemm_type, n, k, num_groups, num_sms, *tile) for tile in ranked[:count]]
    if count > 0 and specs:
        deeper = depth_candidate(specs[0])
        specs += [deeper] if deeper is not None else []
        tall = tall_candidate(specs[0], m)
        specs += [tall] if tall is not None else []          # never among the ranked tiles
    pair = k_split_candidate(gemm_type, m, n, k, num_sms)
    return specs + [pair] if pair is not None and count > 0 else specs


def distinct_shapes_first(ranked: list) -> list:
    """`ranked` tiles (block_m, block_n, multicast), the best-ranked of each tile shape first
    (in rank order), then the others. NOTES (session 35): the model's top four at large M were
    often two shapes with and without a cluster, whose times differ by noise (n4: 0.6..2%),
    while 128x192 sharing B, ranked fifth or sixth, ran 1.087x DeepGEMM's rate at
    16384x2112x7168 against the pick's 0.987 (o1)."""
    seen, first, rest = set(), [], []
    for tile in ranked:
        (rest if tile[:2] in seen else first).append(tile)
        seen.add(tile[:2])
    return first + rest


def depth_candidate(spec: KernelSpec):
    """`spec` with the deepest ring that fits (even where a pair splits the stages), or None
    if that is its own depth: only timed, never picked by the model. `num_stages` keeps the
    fewest stages with the deepest ring's round count; where HBM sets the pace a deeper ring
    keeps more bytes in flight. NOTES (session 34, n1, SM cycles against DeepGEMM): 64x64x13
    against x12 at 128x4096x7168 1.021 / 1.034, at 128x4096x4096 1.014 / 1.008; deeper rings
    lost 3..8% at short K (g2) and on other one-wave rows (n1)."""
    deepest = max_stages(spec.block_m, spec.block_n, spec.k, spec.k_split)
    if runs_pair(spec.block_m, spec.block_n, spec.k, deepest) and deepest % 2:
        deepest -= 1
    if deepest <= spec.num_stages:
        return None
    return KernelSpec(**dict(vars(spec), num_stages=deepest))


# Rows from which the plain GEMM's 256-row tile is worth timing: two of its m-blocks at least.
TALL_MIN_M = 512


def tall_candidate(pick: KernelSpec, m: int):
    """The plain GEMM's 256-row tile to time beside a 128- or 192-row pick at M >= TALL_MIN_M,
    or None: the width (`block_ns(256)`) with the fewest waves x per-tile cycles
    (`narrow_k_block_cycles`, twice; a partial last n-block counts whole), in 2-CTA clusters
    sharing A from two waves of them. Only timed, never picked by the model, which has no fit
    for it. NOTES (session 35): DeepGEMM's large-M tile; its N quantizes by 128 where
    128x256's does by 256."""
    if pick.gemm_type != "normal" or pick.block_m < 128 or m < TALL_MIN_M:
        return None
    k_blocks = ceil_div(pick.k, BLOCK_K)
    best = None
    for block_n in block_ns(256):
        if not num_stages(256, block_n, pick.k):
            continue
        tiles = ceil_div(m, 256) * ceil_div(pick.n, block_n)
        cycles = ceil_div(tiles, pick.num_sms) * 2 * k_blocks * narrow_k_block_cycles(block_n)
        if BLOCK_K % block_n:
            # Straddles two B-scale blocks on most tiles: x1.10 as tile_cycles' selects (96 is
            # compiled per split point; unmeasured for speed, 112 lost 15..23% in o1).
            cycles *= 1.10
        if best is None or cycles < best[0]:
            best = (cycles, block_n, tiles)
    if best is None:
        return None
    _, block_n, tiles = best
    multicast = 2 if tiles >= 2 * pick.num_sms and multicast_fits(256, block_n, 2) else 1
    return _spec(pick.gemm_type, pick.n, pick.k, 1, pick.num_sms, 256, block_n, multicast)


# K blocks from which a K-split pair is worth timing: its exchange and cluster cost ~1.4 us
# per call (bench/NOTES.md e2).
K_SPLIT_MIN_K_BLOCKS = 32


def k_split_candidate(gemm_type: str, m: int, n: int, k: int, num_sms: int):
    """The plain GEMM's K-split pair to time, or None: the 128-row tile, a multiple of 16
    columns wide, whose pairs fit one wave of the SMs and which the cost model rates fastest
    at half of K. Only timed, never picked by the model: these shapes read B from HBM at a
    pace the model does not describe, and the pairs won +8..10% on one long-K shape with few
    tiles (128x2304x16384), tied at 128x4096x7168 and lost 2..6% elsewhere (NOTES e1, e2)."""
    k_blocks = ceil_div(k, BLOCK_K)
    if gemm_type != "normal" or k_blocks % 2 or k_blocks < K_SPLIT_MIN_K_BLOCKS:
        return None
    m_blocks = ceil_div(m, 128)
    best = None
    for block_n in block_ns(128):
        if block_n % 16 or 2 * m_blocks * ceil_div(n, block_n) > num_sms:
            continue
        if not num_stages(128, block_n, k, 2):
            continue
        cycles = tile_cycles(128, block_n, k // 2, 1, False)
        if best is None or cycles < best[0]:
            best = (cycles, block_n)
    if best is None:
        return None
    return _spec(gemm_type, n, k, 1, num_sms, 128, best[1], 1, k_split=2)


def _select(gemm_type: str, m: int, n: int, k: int, num_groups: int,
            num_sms: int) -> KernelSpec:
    ranked = ranked_tiles(gemm_type, m, n, k, num_groups, num_sms)
    if not ranked:
        raise ValueError(f"no tile of the {NAME} kernel fits shared memory at k={k}")
    return _spec(gemm_type, n, k, num_groups, num_sms, *ranked[0])


def _spec(gemm_type: str, n: int, k: int, num_groups: int, num_sms: int, block_m: int,
          block_n: int, multicast: int, k_split: int = 1) -> KernelSpec:
    return KernelSpec(kernel=NAME, gemm_type=gemm_type, n=n, k=k, num_groups=num_groups,
                      block_m=block_m, block_n=block_n, block_k=BLOCK_K,
                      num_stages=num_stages(block_m, block_n, k, k_split),
                      num_tma_multicast=multicast,
                      multicast_on_a=multicast > 1 and shares_a(block_m, block_n),
                      num_sms=num_sms, arch="sm_90a", k_split=k_split)


BLOCK_MS = (64, 128, 192, 256)      # tile heights the kernel runs (256: the plain GEMM only)


def check_tile(block_m: int, block_n: int, num_tma_multicast: int = 1, k_split: int = 1) -> None:
    """ValueError unless the kernel can run a (block_m x block_n) tile in clusters of
    `num_tma_multicast` (or in K-split pairs: `k_split` 2)."""
    if block_m not in BLOCK_MS or block_n not in block_ns(block_m):
        raise ValueError(f"{block_m}x{block_n} is not a tile of the {NAME} kernel: block_m is "
                         f"64, 128, 192 or 256 and a {block_m}-row tile takes block_n in "
                         f"{block_ns(block_m) if block_m in BLOCK_MS else '()'}")
    if num_tma_multicast not in (1, 2):
        raise ValueError(f"num_tma_multicast must be 1 or 2 (CTAs per cluster); got "
                         f"{num_tma_multicast!r}")
    if k_split not in (1, 2):
        raise ValueError(f"k_split must be 1 or 2 (CTAs of a cluster splitting K); got "
                         f"{k_split!r}")
    if k_split > 1 and (block_m != 128 or num_tma_multicast != 1 or block_n % 16):
        raise ValueError(f"K-split pairs run 128-row tiles of a multiple of 16 columns (each CTA "
                         f"stores half of them) without multicast; got {block_m}x{block_n} with "
                         f"num_tma_multicast={num_tma_multicast}")


def with_tile(spec: KernelSpec, block_m: int, block_n: int, num_tma_multicast: int = 1,
              multicast_on_a: bool = True, k_split: int = 1) -> KernelSpec:
    """`spec` with another tile (benchmarks, forced-tile tests): the pipeline depth the
    heuristic would use for that tile; clusters of `num_tma_multicast` CTAs share A, or B
    when `multicast_on_a` is False; `k_split` 2: pairs of CTAs split each tile's K blocks."""
    check_tile(block_m, block_n, num_tma_multicast, k_split)
    stages = num_stages(block_m, block_n, spec.k, k_split)
    if stages == 0:
        raise ValueError(f"with_tile: no pipeline depth of a {block_m}x{block_n} tile fits "
                         f"shared memory at k={spec.k}")
    return KernelSpec(**dict(
        vars(spec), block_m=block_m, block_n=block_n, num_stages=stages,
        num_tma_multicast=num_tma_multicast,
        multicast_on_a=num_tma_multicast > 1 and multicast_on_a, k_split=k_split))


# ------------------------------------------------------------------------------------------
# Launch: TMA descriptors, grid, arguments
# ------------------------------------------------------------------------------------------
_SWIZZLE_128B = 128
_NO_SWIZZLE = 0
# fp8_gemm_kernel(d, scales_b, grouped_layout, scales_a, shape_m, sa_in_place, sa_row_stride,
#                 sa_k_stride, sa_group_stride, tma_a, tma_a_tail, tma_b, tma_scales_a, tma_d)
ARGS = ArgLayout(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                 ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64,
                 ctypes.c_uint64, TmaDescriptor, TmaDescriptor, TmaDescriptor, TmaDescriptor,
                 TmaDescriptor)

# The kernel takes A's scales in any layout (`scales_a_in_place`), so callers pass them as
# they are: no transposing copy for the row-major scales `per_token_cast_to_fp8` returns.
READS_STRIDED_SCALES_A = True

_descriptors = state.table("hopper_fp8.tma_descriptors")
_MAX_CACHED_DESCRIPTORS = 4096


def _tma_desc(ptr: int, dtype, dims: tuple, strides: tuple, box: tuple, swizzle: int):
    """runtime.make_tma_desc, memoised: a descriptor holds nothing but these values, so one
    encoded for the same address and geometry is the same descriptor (a freed and reused
    address included). Saves a driver call per operand when a new call geometry is planned
    (B's map, for one, serves every M)."""
    key = (ptr, dtype, dims, strides, box, swizzle)
    encoded = _descriptors.get(key)
    if encoded is None:
        if len(_descriptors) >= _MAX_CACHED_DESCRIPTORS:
            _descriptors.clear()
        from ..jit import runtime      # the driver, only on a GPU host
        # Kept as bytes, which the garbage collector does not track (a ctypes descriptor
        # drags four tracked objects along: bench/NOTES.md, "w2").
        encoded = _descriptors[key] = bytes(
            runtime.make_tma_desc(ptr, dtype, dims, strides, box, swizzle))
    desc = TmaDescriptor.from_buffer_copy(encoded)
    desc.address = ptr                 # which tensor it maps: launch plans re-point it
    return desc


def _box_rows(spec: KernelSpec, tile_rows: int, shared: bool) -> int:
    """Rows of one TMA box: the whole tile, or, for the operand a cluster shares through
    multicast, the 1/num_tma_multicast slice each CTA loads for all of them."""
    return tile_rows // spec.num_tma_multicast if shared else tile_rows


def a_tail_rows(spec: KernelSpec, m: int) -> int:
    """Rows of A the last m-block of an M-row call loads (the `tma_a_tail` box); header:
    `fp8_gemm_a_tail_rows`, which sets the bytes its stages expect. A plain GEMM whose M is
    not a multiple of the tile height loads only the M % block_m real rows there (no TMA zero
    fill: bench/NOTES.md v24); clusters sharing A load slices of whole tiles."""
    shared_a = spec.num_tma_multicast > 1 and spec.multicast_on_a
    if spec.gemm_type == "normal" and not shared_a and m % spec.block_m:
        return m % spec.block_m
    return spec.block_m


def _tma_a(a: torch.Tensor, spec: KernelSpec, box_rows: int = 0):
    """A as a 2-D [rows, K] fp8 map (masked groups stacked along rows); 128B-swizzled boxes of
    a tile's rows (or `box_rows`)."""
    rows = a.numel() // spec.k
    box = box_rows or _box_rows(spec, spec.block_m, spec.multicast_on_a)
    return _tma_desc(a.data_ptr(), torch.uint8, (spec.k, rows), (spec.k,), (BLOCK_K, box),
                     _SWIZZLE_128B)


def _tma_b(b: torch.Tensor, spec: KernelSpec):
    """B as a 2-D [groups * N, K] fp8 map."""
    rows = b.numel() // spec.k
    box = _box_rows(spec, spec.block_n, not spec.multicast_on_a)
    return _tma_desc(b.data_ptr(), torch.uint8, (spec.k, rows), (spec.k,), (BLOCK_K, box),
                     _SWIZZLE_128B)


def scales_a_in_place(sa: torch.Tensor) -> bool:
    """Whether the kernel reads A's scales `sa` with its cp.async loader warp, through their
    strides, rather than with TMA. TMA needs the MN-major TMA-aligned layout
    (`get_mn_major_tma_aligned_tensor`) at a 16-byte aligned address and is the faster way
    (the loader cost 2..20% there: bench/NOTES.md h2); every other layout is read in place.
    A launch plan's key holds both facts (`plans.plan_key`)."""
    return sa.data_ptr() % 16 != 0 or not is_mn_major_tma_aligned(sa)


def _tma_scales_a(sa: torch.Tensor, spec: KernelSpec):
    """MN-major A scales as a 2-D [K/128 (x groups), rows] fp32 map; one box = one K block
    of one tile's rows. Rows past the logical M read as zeros (TMA out-of-bounds fill)."""
    rows, k_blocks = sa.shape[-2], sa.shape[-1]
    # The layout's pitch between K blocks (and between groups, which follow one another).
    # stride(-1) means nothing when K/128 == 1; the group stride then carries it.
    if k_blocks > 1:
        row_stride = sa.stride(-1)
    elif sa.dim() == 3 and sa.shape[0] > 1:
        row_stride = sa.stride(0)
    else:
        row_stride = ceil_div(rows, 4) * 4
    outer = sa.numel() // rows                      # K/128, times groups when masked
    return _tma_desc(sa.data_ptr(), torch.float32, (rows, outer), (row_stride * 4,),
                     (spec.block_m, 1), _NO_SWIZZLE)


def scales_a_strides(sa: torch.Tensor) -> tuple:
    """(row, K block, group) element strides of A's scales `[(groups,) rows, K/128]`, as the
    kernel's A-scale loader addresses them (group stride 0 without groups)."""
    strides = sa.stride()
    return strides[-2], strides[-1], strides[0] if sa.dim() == 3 else 0


def _tma_d(d: torch.Tensor, spec: KernelSpec):
    """D as a 2-D [rows, N] bf16 map (masked groups stacked along rows); one box = 64 rows x
    64 columns of a warpgroup's tile."""
    return _tma_desc(d.data_ptr(), torch.bfloat16, (spec.n, d.numel() // spec.n), (spec.n * 2,),
                     (64, 64), _SWIZZLE_128B)


def grid_size(spec: KernelSpec, m: int) -> int:
    """Persistent grid: one CTA per SM, fewer when the problem has fewer tiles; a multiple of
    the cluster size (a K-split pair: two CTAs per tile)."""
    cluster = spec.cluster_dim
    if spec.gemm_type == "grouped_masked":
        return spec.num_sms - spec.num_sms % cluster   # tile count depends on masked_m (device)
    unit_m, unit_n = cluster_unit(spec.num_tma_multicast, spec.multicast_on_a)
    units = (ceil_div(ceil_div(m, spec.block_m), unit_m) *
             ceil_div(ceil_div(spec.n, spec.block_n), unit_n))
    return max(1, min(spec.num_sms // cluster, units)) * cluster


def launch_args(spec: KernelSpec, a, sa, b, sb, d, layout) -> tuple:
    """(grid, values in `ARGS` order) of one validated call (layouts in docs/architecture.md).
    Values depend on the tensors only through their data pointers and the geometry a launch
    plan is keyed on (`dgemm.kernels.plans`), which builds them once per geometry."""
    shape_m = a.shape[-2]                          # M, or max_m for the masked layout
    layout_ptr = layout.data_ptr() if layout is not None else 0
    tma_a = _tma_a(a, spec)
    # The last m-block's A (M % block_m rows); the whole-tile map where there is no tail.
    tail_rows = a_tail_rows(spec, shape_m)
    tma_a_tail = tma_a if tail_rows == spec.block_m else _tma_a(a, spec, tail_rows)
    # Kernels that do not store through TMA ignore their last descriptor.
    tma_d = _tma_d(d, spec) if uses_tma_store(spec) else tma_a
    # A's scales: through TMA, or (any other layout) by the loader warp; the kernel ignores
    # the unused one (a's map stands in for the scales' map).
    in_place = scales_a_in_place(sa)
    tma_sa = tma_a if in_place else _tma_scales_a(sa, spec)
    return (grid_size(spec, shape_m), 1, 1), (
        d.data_ptr(), sb.data_ptr(), layout_ptr, sa.data_ptr(), shape_m, int(in_place),
        *scales_a_strides(sa), tma_a, tma_a_tail, _tma_b(b, spec), tma_sa, tma_d)


def launch(spec: KernelSpec, a, sa, b, sb, d, layout, kernel=None, stream=None) -> None:
    """Run one call on `stream` (default: torch's current stream). Inputs are validated by
    dgemm.gemm. `kernel`: an already loaded build of `spec` (benchmarks comparing kernel
    sources); default: the cached one."""
    if kernel is None:
        kernel = get_kernel(spec, a.device.index)
    if stream is None:
        stream = current_stream(kernel.device_index)
    plans.launch(sys.modules[__name__], spec, kernel, a, sa, b, sb, d, layout, stream)
