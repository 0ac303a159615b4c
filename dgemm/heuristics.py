"""Kernel selection: (kind, m, n, k, groups, SMs, arch) -> KernelSpec.

Pure Python and GPU-free, so a CPU-only prewarm host computes exactly the specs (and therefore
the cache keys) that a GPU rank will ask for. Everything a `KernelSpec` fixes becomes a template
argument of the CUDA kernel; only M, pointers and tensor maps arrive at run time.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math

KINDS = ("fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked")
GEMM_TYPES = {
    "fp8_gemm_nt": "normal",
    "m_grouped_fp8_gemm_nt_contiguous": "grouped_contiguous",
    "m_grouped_fp8_gemm_nt_masked": "grouped_masked",
}
# Enum names of `dgemm::GemmType` in csrc/dgemm/scheduler.cuh.
_CPP_GEMM_TYPE = {
    "normal": "GemmType::Normal",
    "grouped_contiguous": "GemmType::GroupedContiguous",
    "grouped_masked": "GemmType::GroupedMasked",
}

BLOCK_K = 128                      # one FP8 scale block along K; fixed by the scaling recipe
HOPPER_SMEM_CAPACITY = 232_448     # bytes of dynamic shared memory one sm_90 CTA may use
HOPPER_ARCHS = ("sm_90a",)
FORMAT_VERSION = 1                 # bump when the meaning of a spec field changes


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """Everything that is compiled into one kernel. Hashable; `to_json()` is canonical."""
    kernel: str                # "fp8_gemm" (sm_90a, TMA + WGMMA) or "fp8_gemm_portable" (sm_80+)
    gemm_type: str             # "normal" | "grouped_contiguous" | "grouped_masked"
    n: int
    k: int
    num_groups: int
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_tma_multicast: int     # CTAs per cluster sharing one TMA load (1 = no multicast)
    multicast_on_a: bool       # with multicast: True shares A tiles (same m-block, adjacent
                               # n-blocks), False shares B (same n-block; plain GEMM only)
    num_sms: int               # persistent grid size (0 for the non-persistent portable kernel)
    arch: str                  # "sm_90a", "sm_80", ...

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "KernelSpec":
        return cls(**json.loads(text))

    # --- what the JIT needs to instantiate the kernel ------------------------------------
    @property
    def header(self) -> str:
        return f"dgemm/{self.kernel}.cuh"

    @property
    def num_math_threads(self) -> int:
        # WGMMA warpgroups: 64 rows each (block_m 128, 192) or two on alternate K blocks
        # (block_m 64).
        if self.kernel != "fp8_gemm":
            return 0
        return 384 if self.block_m == 192 else 256

    @property
    def num_threads(self) -> int:
        if self.kernel == "fp8_gemm":
            return 128 + self.num_math_threads       # one TMA producer warpgroup + math warpgroups
        return _PORTABLE_THREADS

    def cpp_instance(self) -> str:
        """The C++ template-id that the generated source instantiates."""
        gemm_type = "dgemm::" + _CPP_GEMM_TYPE[self.gemm_type]
        if self.kernel == "fp8_gemm":
            args = (gemm_type, self.n, self.k, self.num_groups, self.block_m, self.block_n,
                    self.block_k, self.num_stages, self.num_tma_multicast,
                    "true" if self.multicast_on_a else "false", self.num_sms, self.num_math_threads)
            return "dgemm::fp8_gemm_kernel<" + ", ".join(str(a) for a in args) + ">"
        args = (gemm_type, self.n, self.k, self.num_groups, self.block_m, self.block_n,
                self.block_k, _PORTABLE_THREADS)
        return "dgemm::fp8_gemm_portable_kernel<" + ", ".join(str(a) for a in args) + ">"

    @property
    def cluster_unit(self) -> tuple:
        """(m-blocks, n-blocks) of one cluster tile (csrc/dgemm/scheduler.cuh)."""
        return cluster_unit(self.num_tma_multicast, self.multicast_on_a)

    @property
    def smem_bytes(self) -> int:
        if self.kernel == "fp8_gemm":
            return hopper_smem_bytes(self.block_m, self.block_n, self.k, self.num_stages)
        return portable_smem_bytes(self.block_m, self.block_n, self.block_k)


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


# ------------------------------------------------------------------------------------------
# Hopper (sm_90a) kernel: csrc/dgemm/fp8_gemm.cuh
# ------------------------------------------------------------------------------------------
def hopper_smem_bytes(block_m: int, block_n: int, k: int, num_stages: int) -> int:
    """Mirror of the shared-memory carving in csrc/dgemm/fp8_gemm.cuh (keep the two in sync)."""
    pitch = block_n * 2 + (16 if block_n % 16 == 0 else 0)   # bank-conflict-free bf16 rows
    smem_d = block_m * pitch
    smem_a = block_m * BLOCK_K                            # fp8, 128B-swizzled rows of 128 B
    smem_b = block_n * BLOCK_K
    smem_scales_a = block_m * 4
    barriers = num_stages * 2 * 8 + 4 * 8               # + B-scale slots' full/empty
    # Two slots of a tile's B scales: K/128 floats per 128-column scale block it touches.
    scales_b = 2 * ceil_div(k, BLOCK_K) * (1 if BLOCK_K % block_n == 0 else 2) * 4
    return smem_d + num_stages * (smem_a + smem_b + smem_scales_a) + barriers + scales_b


def hopper_max_stages(block_m: int, block_n: int, k: int) -> int:
    """Deepest pipeline (3..16 stages) that fits shared memory, or 0: more bytes in flight hide
    TMA latency on the small-M shapes."""
    return max((s for s in range(3, 17)
                if hopper_smem_bytes(block_m, block_n, k, s) <= HOPPER_SMEM_CAPACITY), default=0)


def hopper_num_stages(block_m: int, block_n: int, k: int) -> int:
    """Pipeline depth for a tile, or 0 if none fits: each tile walks the ring in whole rounds
    of stages (slots past the last K block go unused), so take the fewest stages that keep the
    deepest pipeline's round count: e.g. 56 K blocks with room for 5 stages -> 12 rounds -> 5,
    with room for 6 -> 10 rounds -> 6; 4 K blocks -> 4 stages."""
    deepest = hopper_max_stages(block_m, block_n, k)
    if deepest == 0:
        return 0
    k_blocks = ceil_div(k, BLOCK_K)
    # Never fewer than 3 (or the K blocks there are): with 2 the producer is one stage ahead.
    return max(ceil_div(k_blocks, ceil_div(k_blocks, deepest)), min(3, k_blocks))


def _hopper_block_ns(block_m: int) -> tuple:
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
    # 256: two 128-column waves per K block through one temporary accumulator.
    return narrow + (256,) if block_m == 128 else narrow


def _hopper_tile_cycles(block_m: int, block_n: int, k: int, multicast: int = 1,
                        full_wave: bool = True) -> float:
    """SM cycles for one output tile: K blocks x cycles per K block + per-tile cost, fitted to
    the H200 sweeps of kernel v9/v10 and v12..v16 (bench/NOTES.md; `python bench/bench_gemm.py
    --sweep`, `python bench/compare_tiles.py`).

    NOTES: per K block (~1.75 GHz), 128-row tiles took ~247 + 3.9 * block_n clk up to 128
    columns (64 -> 489, 128 -> 745 measured; never below ~420 however narrow) and ~6..7.5 clk
    per column beyond; 192-row tiles (three warpgroups) 550 + 3.65 * block_n (64 -> 784,
    128 -> 1018); 64-row split-K tiles ~280 + 3.3 * block_n. Per tile ~1200 clk (128 rows),
    ~1800 (192 rows) of fill and epilogue; 64-row tiles of the small-M shapes pay more per tile
    the wider they are (first loads from HBM). `full_wave`: the problem has at least one tile
    per SM (steady state); fewer tiles pay their first loads and epilogue unhidden."""
    k_blocks = ceil_div(k, BLOCK_K)
    if block_m == 64:
        k_block, per_tile = 280 + 3.3 * block_n, 600 + 40 * block_n
    elif block_m == 192:
        k_block, per_tile = 550 + 3.65 * block_n, 1800
    else:
        if block_n == 256:
            # Two waves; ~12% fewer shared-memory bytes per FLOP than 128 columns. Fitted to
            # kernel v18 at K = 1536..7168 with several waves (bench/NOTES.md v18); less than
            # one wave keeps the v12 fit (3000 per tile), which matched those shapes.
            k_block, per_tile = (1340, 1100) if full_wave else (1385, 3000)
        else:
            k_block = max(420, 247 + 3.9 * block_n) if block_n <= 128 else 7.5 * block_n
            if 96 < block_n < 128:
                # Straddles two B-scale blocks on most tiles (per-column scale select). NOTES:
                # masked 7168x2048 at 128x112 ran 0.83x the rate of 128x128 (v12 sweep).
                k_block *= 1.12
            per_tile = 1200
    if multicast > 1:
        # 2-CTA clusters sharing one operand: fewer L2 bytes and watts per K block (the H200
        # runs these shapes at its power cap, so the clock rises), but the pair waits on each
        # other at tile boundaries. NOTES: fitted to v16 (bench/NOTES.md): 128x256 sharing B
        # +0.5..3% at K >= 7168, -1% at K = 2048, -3% at K = 512.
        k_block, per_tile = k_block * 0.982, per_tile + 900
    return k_blocks * k_block + per_tile


def _shares_a(block_m: int, block_n: int) -> bool:
    """A cluster multicasts the operand with more rows per tile (A on ties). NOTES: 128x256
    sharing B beat sharing A; 192x128 sharing A beat sharing B by 3..7% (v16)."""
    return block_m >= block_n


def cluster_unit(multicast: int, on_a: bool) -> tuple:
    """(m-blocks, n-blocks) of one cluster tile: `multicast` n-blocks sharing A, or m-blocks
    sharing B (csrc/dgemm/scheduler.cuh)."""
    return (1, multicast) if on_a or multicast == 1 else (multicast, 1)


@functools.lru_cache(maxsize=4096)
def _select_hopper(gemm_type: str, m: int, n: int, k: int, num_groups: int,
                   num_sms: int) -> KernelSpec:
    # The masked layout's m is only a hint (expected rows per group; the real counts live on
    # the device): score it over a spread of row counts so that a tile count that just fits
    # one more wave at exactly expected_m does not decide. NOTES: 128x256 tiles picked for
    # expected_m = 1024 fit 128 SMs at 1024 rows but took two waves at the benchmark's
    # 0.7..1.3 x spread (0.93x of DeepGEMM, v12).
    row_counts = (max(1, m * 3 // 4), m, m * 5 // 4) if gemm_type == "grouped_masked" else (m,)

    groups = num_groups if gemm_type == "grouped_masked" else 1

    def num_tiles(block_m, block_n, multicast, rows):
        # Whole cluster tiles: `multicast` n-blocks (sharing A) or m-blocks (sharing B).
        unit_m, unit_n = cluster_unit(multicast, _shares_a(block_m, block_n))
        return (ceil_div(ceil_div(rows, block_m), unit_m) * unit_m * groups *
                ceil_div(ceil_div(n, block_n), unit_n) * unit_n)

    def score(config):
        block_m, block_n, multicast = config
        waves = [ceil_div(num_tiles(block_m, block_n, multicast, rows), num_sms)
                 for rows in row_counts]
        tiles = num_tiles(block_m, block_n, multicast, m)
        last_wave = tiles - (ceil_div(tiles, num_sms) - 1) * num_sms
        # The slowest SM sets the time: waves x cycles per tile. Then prefer a full last
        # wave, less wasted area beyond N, the larger tile (better reuse).
        cycles = _hopper_tile_cycles(block_m, block_n, k, multicast, tiles >= num_sms)
        return (sum(waves) / len(waves) * cycles,
                -last_wave, ceil_div(n, block_n) * block_n - n, -block_n, multicast)

    # Clusters of 2 CTAs share the tile's larger operand through TMA multicast (A: adjacent
    # n-blocks of one m-block; B, plain GEMM only: adjacent m-blocks of one n-block). They pay
    # only on long K (cost model above) and only with at least two waves of clusters (DeepGEMM's
    # rule too). Grouped layouts keep single CTAs (no gain measured, bench/NOTES.md v12).
    multicasts = (1, 2) if gemm_type == "normal" else (1,)
    # 192-row tiles would straddle the contiguous layout's 128-row group padding.
    block_ms = (64,) if m <= 64 else (64, 128) if gemm_type == "grouped_contiguous" else (
        (64, 128, 192) if m > 128 else (64, 128))
    # NOTES: 136 and 144 wide 128-row tiles measured below 128 on 4 of 6 large shapes (v4
    # sweep); only the clearly wider 160 and 192 pay for their extra width there.
    def clusters_fill_two_waves(block_m, block_n, multicast):
        return multicast == 1 or num_tiles(block_m, block_n, multicast, m) >= 2 * num_sms

    # NOTES: 256-column tiles lost at K = 512 at every M measured (128x32768x512: 0.89x the
    # rate of 128x128; 4096x32768x512: 0.92x of 192x128, bench/NOTES.md v18): with 4 K blocks
    # the 64 KB epilogue of each tile is not amortised.
    wide_ok = ceil_div(k, BLOCK_K) >= 8
    block_m, block_n, multicast = min(((bm, bn, mc) for bm in block_ms
                                       for bn in _hopper_block_ns(bm)
                                       if bm == 64 or bn <= 128 or (bn >= 160 and
                                                                    (bn < 256 or wide_ok))
                                       for mc in multicasts
                                       if clusters_fill_two_waves(bm, bn, mc)),
                                      key=score)
    multicast_on_a = multicast > 1 and _shares_a(block_m, block_n)

    num_stages = hopper_num_stages(block_m, block_n, k)
    if num_stages == 0:
        raise ValueError(f"no pipeline depth fits shared memory for block {block_m}x{block_n}, "
                         f"k={k}")

    return KernelSpec(kernel="fp8_gemm", gemm_type=gemm_type, n=n, k=k, num_groups=num_groups,
                      block_m=block_m, block_n=block_n, block_k=BLOCK_K, num_stages=num_stages,
                      num_tma_multicast=multicast, multicast_on_a=multicast_on_a,
                      num_sms=num_sms, arch="sm_90a")


# ------------------------------------------------------------------------------------------
# Portable (sm_80+) kernel: csrc/dgemm/fp8_gemm_portable.cuh
# ------------------------------------------------------------------------------------------
_PORTABLE_THREADS = 128


def portable_smem_bytes(block_m: int, block_n: int, block_k: int) -> int:
    """Mirror of the shared-memory carving in csrc/dgemm/fp8_gemm_portable.cuh."""
    return 2 * (block_m + block_n) * block_k   # two stages of fp8 A and B tiles


@functools.lru_cache(maxsize=4096)
def _select_portable(gemm_type: str, m: int, n: int, k: int, num_groups: int,
                     arch: str) -> KernelSpec:
    return KernelSpec(kernel="fp8_gemm_portable", gemm_type=gemm_type, n=n, k=k,
                      num_groups=num_groups, block_m=64, block_n=64, block_k=BLOCK_K,
                      num_stages=2, num_tma_multicast=1, multicast_on_a=False, num_sms=0,
                      arch=arch)


# ------------------------------------------------------------------------------------------
def select(kind: str, m: int, n: int, k: int, num_groups: int = 1, num_sms: int = 132,
           arch: str = "sm_90a") -> KernelSpec:
    """Pick the kernel for one call. `m` is the (expected) rows per group for grouped kinds
    (the masked layout's `expected_m`, the contiguous layout's total rows)."""
    if kind not in GEMM_TYPES:
        raise ValueError(f"unknown kernel kind {kind!r}; expected one of {', '.join(KINDS)}")
    for name, value in (("m", m), ("n", n), ("k", k), ("num_groups", num_groups),
                        ("num_sms", num_sms)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"select: {name} must be a positive int; got {value!r}")
    if k % BLOCK_K != 0:
        raise ValueError(f"select: k must be a multiple of {BLOCK_K}; got {k}")
    gemm_type = GEMM_TYPES[kind]
    if arch in HOPPER_ARCHS:
        return _select_hopper(gemm_type, m, n, k, num_groups, num_sms)
    if not arch.startswith("sm_") or not arch[3:].rstrip("a").isdigit() or int(
            arch[3:].rstrip("a")) < 80:
        raise ValueError(f"select: arch must be sm_80 or newer (e.g. 'sm_90a'); got {arch!r}")
    return _select_portable(gemm_type, m, n, k, num_groups, arch)
