"""The sm_90a FP8 weight-gradient family (csrc/dgemm/fp8_wgrad.cuh), recipe (1, 1, 128):
D (fp32) = C + A . B^T where A [M, K] and B [N, K] both carry one scale per row and 128-wide
K block. TMA loads, WGMMA, warp specialisation, a persistent grid; K is a run-time value per
group, so a spec (and a kernel) serves every K of a layer, and the same kernel can run the
dense and k-grouped GEMMs (the pick may differ by the group count): a launch walks up to
MAX_GROUPS groups, whose tensor maps travel in one parameter
block (`Groups`). The epilogue adds the tile to D with TMA reductions when D allows it
(`reduce_into_d`), else from the registers.

Like every family module it owns selection, template arguments, threads, the shared-memory
plan (checked against the header at compile time: `dgemm::Fp8WgradPlanCheck`), the TMA
descriptors, the grid and the launch.
"""
from __future__ import annotations

import ctypes

from ..jit import state
from ..jit.args import ArgLayout, TmaDescriptor
from ..utils import ceil_div
from .loader import get_kernel
from .spec import KernelSpec, refuse_k_split

NAME = "fp8_wgrad"
HEADER = "dgemm/fp8_wgrad.cuh"
ARCHS = ("sm_90a",)
BLOCK_M = 128                     # two math warpgroups of 64 rows
BLOCK_K = 128
BLOCK_NS = tuple(range(32, 161, 8))   # WGMMA widths; the accumulators of 160 columns (+ the
                                      # final ones) fit the registers
# What the heuristic weighs. 136 (two accumulator sets, session 19, z1) runs at 128's rate
# per column and fills the last wave where 128 does not. 120 ran ~7% slower per column than
# 128 once 128 and 136 had five stages and early scale reads (session 23, c2: forced over 60
# shapes of the broad suite), so it never pays for the wave it saves: a probe now, like 144
# and 152 (one accumulator set, slower per FLOP alone and in clusters: session 16 w1-w3) and
# 160 with a fourth stage (session 21 b1: 0.835 of DeepGEMM against 0.98).
CANDIDATE_BLOCK_NS = (64, 96, 128, 136)
_D_CHUNK_COLUMNS = 32             # header: kChunkColumns (the tail chunk has the rest)
_D_CHUNK_BYTES = 64 * 128         # header: kWgradChunkBytes, a chunk slot
THREADS = 128 + 256               # header: kWgradProducerThreads + kWgradMathThreads
SMEM_CAPACITY = 232_448
MAX_STAGES = 8


def num_threads(spec: KernelSpec) -> int:
    return THREADS


def smem_plan(block_m: int, block_n: int, num_stages: int) -> int:
    """Header: `fp8_wgrad_smem(...).total`: the reduce epilogue's chunk slots (64 rows x 128
    bytes, `d_slots` per warpgroup of 64 rows), then per stage the A and B tiles, both scale
    vectors (B's padded to 128 bytes: a TMA destination), in two slots (one per lap of the
    ring) where the tile keeps two accumulator sets, and a full and an empty barrier."""
    return _smem(block_m, block_n, num_stages, d_slots(block_m, block_n, num_stages))


def _smem(block_m: int, block_n: int, num_stages: int, slots: int) -> int:
    scales_b = ceil_div(block_n * 4, 128) * 128
    laps = 2 if two_accumulators(block_n) else 1
    return block_m // 64 * d_bytes(block_n, slots) + num_stages * (
        block_m * BLOCK_K + block_n * BLOCK_K + laps * (block_m * 4 + scales_b) + 16)


def d_chunks(block_n: int) -> int:
    """Header: `fp8_wgrad_d_chunks`: the reduce epilogue's 32-column chunks and tail."""
    return ceil_div(block_n, _D_CHUNK_COLUMNS)


def d_bytes(block_n: int, slots: int) -> int:
    """Header: `fp8_wgrad_d_bytes`: a warpgroup's slots, the whole tile (its tail's slot as
    large as the tail) or `slots` chunk slots that the tail shares."""
    return 64 * block_n * 4 if slots == d_chunks(block_n) else slots * _D_CHUNK_BYTES


def min_d_slots(block_n: int) -> int:
    """Header: `fp8_wgrad_min_d_slots`: two, one written while TMA reads the other (one for
    a one-chunk tile)."""
    return min(d_chunks(block_n), 2)


def d_slots(block_m: int, block_n: int, num_stages: int) -> int:
    """Header: `fp8_wgrad_d_slots`: the most chunk slots, up to one per chunk, that fit beside
    the stages (the whole tile where it fits; slots are reused within a tile otherwise), and
    no fewer than `min_d_slots`."""
    slots = d_chunks(block_n)
    while (slots > min_d_slots(block_n)
           and _smem(block_m, block_n, num_stages, slots) > SMEM_CAPACITY):
        slots -= 1
    return slots


def two_accumulators(block_n: int) -> bool:
    """Header: `fp8_wgrad_two_accumulators`: tiles up to 136 columns promote K block k while
    K block k + 1's WGMMAs run."""
    return block_n <= 136


def smem_bytes(spec: KernelSpec) -> int:
    return smem_plan(spec.block_m, spec.block_n, spec.num_stages)


def num_stages(block_n: int) -> int:
    """The deepest ring that leaves the reduce epilogue two chunk slots (one where a tile is
    one chunk): a stage is worth more than the slots past two (session 21, b1)."""
    return max(s for s in range(2, MAX_STAGES + 1)
               if _smem(BLOCK_M, block_n, s, min_d_slots(block_n)) <= SMEM_CAPACITY)


def groups_bytes(spec: KernelSpec) -> int:
    """Header: `sizeof(Fp8WgradGroups)`, the launch's group parameter block."""
    return ctypes.sizeof(Groups)


def cpp_instance(spec: KernelSpec) -> str:
    args = (spec.n, spec.block_m, spec.block_n, spec.block_k, spec.num_stages, spec.num_sms,
            spec.num_tma_multicast, "true" if spec.multicast_on_a else "false")
    return "dgemm::fp8_wgrad_kernel<" + ", ".join(map(str, args)) + ">"


def plan_checks(spec: KernelSpec) -> str:
    refuse_k_split(spec)
    check_tile(spec.block_m, spec.block_n, spec.num_tma_multicast)
    args = (spec.block_m, spec.block_n, spec.block_k, spec.num_stages, smem_bytes(spec),
            num_threads(spec), groups_bytes(spec))
    return "template struct dgemm::Fp8WgradPlanCheck<" + ", ".join(map(str, args)) + ">;"


def check_tile(block_m: int, block_n: int, multicast: int = 1) -> None:
    if block_m != BLOCK_M or block_n not in BLOCK_NS:
        raise ValueError(f"{block_m}x{block_n} is not a tile of the {NAME} kernel: block_m is "
                         f"{BLOCK_M} and block_n one of {BLOCK_NS}")
    if multicast not in (1, 2):
        raise ValueError(f"{NAME}: num_tma_multicast must be 1 or 2 (CTAs per cluster); got "
                         f"{multicast}")


_selections = state.table("hopper_wgrad.selections")


def cluster_units(m: int, n: int, block_n: int, multicast: int, on_a: bool) -> tuple:
    """(cluster tiles, CTA tiles past M or N computed for nothing) of one group."""
    m_blocks, n_blocks = ceil_div(m, BLOCK_M), ceil_div(n, block_n)
    if multicast == 1:
        return m_blocks * n_blocks, 0
    if on_a:
        return m_blocks * ceil_div(n_blocks, 2), m_blocks * (n_blocks % 2)
    return ceil_div(m_blocks, 2) * n_blocks, (m_blocks % 2) * n_blocks


def tile_time(block_n: int) -> float:
    """One K block of one tile in 128 x 128 x 128 WGMMA block times: narrow tiles run WGMMA
    below its rate (y6: 96 1.06, fitted as 1.1 for 96 and 64; session 23, c2, over the broad
    suite: 96 1.05..1.1 pick alike, 64 not re-measured)."""
    return block_n / 128 * (1.1 if block_n < 112 else 1.0)


def launch_waves(tiles_per_group: int, num_groups: int, num_sms: int) -> int:
    """Waves of tiles over the SMs, summed over the launches a call makes: the k-grouped GEMM
    runs up to MAX_GROUPS groups per launch, in shares of `share` groups and a last one of the
    rest, every tile of a launch in one persistent grid (launch_groups). The count is d's
    groups: a step's empty groups are not launched, but counting them keeps the pick
    independent of the step's tokens."""
    share = ceil_div(num_groups, ceil_div(num_groups, MAX_GROUPS))
    full, rest = divmod(num_groups, share)
    return (full * ceil_div(tiles_per_group * share, num_sms)
            + (ceil_div(tiles_per_group * rest, num_sms) if rest else 0))


def select(gemm_type: str, m: int, n: int, k: int, num_groups: int, num_sms: int,
           arch: str = "sm_90a") -> KernelSpec:
    """The tile for an M x N weight gradient over `num_groups` groups (K does not enter: it
    is a run-time value, possibly different per group and per step, and one kernel serves
    every K of a layer): fewest waves of tiles over the call's launches times the time of
    one, then the wider tile. Counting the waves of a whole launch instead of one group's
    (session 23, c2) took the k-grouped rows with short K per group off 136 where 128 fills
    the launch's waves better. No clusters: on an H200 every 2-CTA multicast tile (128 and
    160 wide, sharing A or B) ran 7..17% slower than the same tile alone (bench/NOTES.md,
    wgrad v2), 128 wide still 2..3% with two accumulator sets (session 18, y5; session 19,
    z1: 128x2b 0.933 and 136x2b 0.929 against 128x1 0.967); `bench_wgrad --tile` still probes
    them; with five stages too (session 21, b2: 136x2b 0.927, 128x2b 0.951 against 0.987;
    session 23, c1: 120x2b 0.917, 128x2b 1.000 against 1.032). Fewer than 4 stages leave
    TMA's latency exposed."""
    args = (m, n, num_groups, num_sms)
    spec = _selections.get(args)
    if spec is None:
        def score(block_n):
            tiles = ceil_div(m, BLOCK_M) * ceil_div(n, block_n)
            return (launch_waves(tiles, num_groups, num_sms) * tile_time(block_n), -block_n)
        block_n = min((b for b in CANDIDATE_BLOCK_NS if num_stages(b) >= 4), key=score)
        spec = _selections[args] = KernelSpec(
            kernel=NAME, gemm_type="normal", n=n, k=0, num_groups=1, block_m=BLOCK_M,
            block_n=block_n, block_k=BLOCK_K, num_stages=num_stages(block_n),
            num_tma_multicast=1, multicast_on_a=False, num_sms=num_sms, arch="sm_90a")
    return spec


# ------------------------------------------------------------------------------------------
# Launch
# ------------------------------------------------------------------------------------------
_SWIZZLE_128B = 128
_NO_SWIZZLE = 0
MAX_GROUPS = 12                   # header: kWgradMaxGroups
_D_BOX = (_D_CHUNK_COLUMNS, 64, 1)   # header: the reduce epilogue's 32-column x 64-row chunks


class Groups(ctypes.Structure):
    """Header: `dgemm::Fp8WgradGroups` (64-byte aligned there, hence the tail padding)."""
    _fields_ = [("a", TmaDescriptor * MAX_GROUPS), ("b", TmaDescriptor * MAX_GROUPS),
                ("num_k_blocks", ctypes.c_uint32 * MAX_GROUPS),
                ("k_block_offset", ctypes.c_uint32 * MAX_GROUPS),
                ("d_index", ctypes.c_uint32 * MAX_GROUPS),
                ("num_groups", ctypes.c_uint32),
                ("_pad", ctypes.c_uint8 * (-(MAX_GROUPS * (2 * ctypes.sizeof(TmaDescriptor) + 3 * 4)
                                             + 4) % 64))]


# fp8_wgrad_kernel(c, d, shape_m, reduce_into_d, groups, tma_scales_a, tma_scales_b, tma_d,
#                  tma_d_tail)
ARGS = ArgLayout(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, Groups,
                 TmaDescriptor, TmaDescriptor, TmaDescriptor, TmaDescriptor)


def _desc(*args):
    from ..jit.runtime import make_tma_desc           # the driver, only on a GPU host
    return make_tma_desc(*args)


def _operand_desc(ptr: int, rows: int, k: int, box_rows: int):
    import torch
    return _desc(ptr, torch.uint8, (k, rows), (k,), (BLOCK_K, box_rows), _SWIZZLE_128B)


def _scales_desc(ptr: int, rows: int, k_blocks: int, row_stride: int, box_rows: int):
    import torch
    return _desc(ptr, torch.float32, (rows, k_blocks), (row_stride * 4,), (box_rows, 1),
                 _NO_SWIZZLE)


def _d_desc(ptr: int, groups: int, m: int, n: int, box=_D_BOX, swizzle=_SWIZZLE_128B):
    import torch
    return _desc(ptr, torch.float32, (n, m, groups), (n * 4, m * n * 4), box, swizzle)


def _d_tail_desc(ptr: int, groups: int, m: int, n: int, block_n: int):
    """The last block_n % 32 columns of a tile: one unswizzled box of them x 64 rows."""
    tail = block_n % _D_CHUNK_COLUMNS
    if not tail:
        return TmaDescriptor()
    return _d_desc(ptr, groups, m, n, (tail, _D_BOX[1], 1), _NO_SWIZZLE)


def _reduce_into(c, d) -> bool:
    """Whether the reduce epilogue can add to d (its TMA map needs 16-byte rows and base); if
    so, d is made equal to c first (every group's slice, the empty ones included)."""
    reduce = d.shape[-1] % 4 == 0 and d.data_ptr() % 16 == 0
    if reduce and c is not d:
        d.copy_(c)
    return reduce


def grid_size(spec: KernelSpec, m: int, num_groups: int = 1) -> int:
    """Whole clusters, no more than the SMs hold or the cluster tiles need."""
    cluster = spec.num_tma_multicast
    units = cluster_units(m, spec.n, spec.block_n, cluster, spec.multicast_on_a)[0]
    return max(1, min(spec.num_sms // cluster, units * num_groups)) * cluster


def launch_groups(spec: KernelSpec, m: int, groups: list, sa_ptr: int, sa_kb: int,
                  sb_ptr: int, sb_kb: int, c_ptr: int, d_ptr: int, d_groups: int,
                  reduce: bool, kernel) -> None:
    """D[g] (+)= A_g . B_g^T for each (d_index, k, k_block_offset, a_ptr, b_ptr) of `groups`
    (k > 0), MAX_GROUPS per launch, on torch's current stream. Scales MN-major over every
    group's K blocks (`sa_kb` / `sb_kb` of them, rows padded to 4); C and D fp32
    [d_groups, m, n]. With `reduce` D must already hold C (`_reduce_into`)."""
    n = spec.n
    scales_a = _scales_desc(sa_ptr, m, sa_kb, ceil_div(m, 4) * 4, spec.block_m)
    scales_b = _scales_desc(sb_ptr, n, sb_kb, ceil_div(n, 4) * 4, spec.block_n)
    d_map = _d_desc(d_ptr, d_groups, m, n) if reduce else TmaDescriptor()
    d_tail = _d_tail_desc(d_ptr, d_groups, m, n, spec.block_n) if reduce else TmaDescriptor()
    # Even shares per launch: a short last launch would leave most SMs idle.
    launches = ceil_div(len(groups), MAX_GROUPS)
    share = ceil_div(len(groups), launches)
    for first in range(0, len(groups), share):
        chunk = groups[first:first + share]
        block = Groups(num_groups=len(chunk))
        for i, (d_index, k, kb_offset, a_ptr, b_ptr) in enumerate(chunk):
            block.a[i] = _operand_desc(a_ptr, m, k, spec.block_m)
            block.b[i] = _operand_desc(b_ptr, n, k, spec.block_n)
            block.num_k_blocks[i] = k // BLOCK_K
            block.k_block_offset[i] = kb_offset
            block.d_index[i] = d_index
        args = ARGS.pack(c_ptr, d_ptr, m, int(reduce), block, scales_a, scales_b, d_map,
                         d_tail)
        kernel.launch((grid_size(spec, m, len(chunk)), 1, 1), args)


def launch(spec: KernelSpec, a, sa, b, sb, c, d, kernel=None) -> None:
    """D = C + A . B^T on torch's current stream; inputs validated by dgemm.wgrad (sa, sb
    already MN-major and TMA-aligned, K > 0)."""
    if kernel is None:
        kernel = get_kernel(spec, a.device.index)
    m, k = a.shape
    reduce = _reduce_into(c, d)
    launch_groups(spec, m, [(0, k, 0, a.data_ptr(), b.data_ptr())], sa.data_ptr(),
                  k // BLOCK_K, sb.data_ptr(), k // BLOCK_K, c.data_ptr(), d.data_ptr(), 1,
                  reduce, kernel)


def launch_k_grouped(spec: KernelSpec, a, sa, b, sb, c, d, ks: list, kernel=None) -> None:
    """For each group g with K_g = ks[g] > 0: d[g] = c[g] + A_g . B_g^T (DeepGEMM's layout:
    A_g [m, K_g] and B_g [n, K_g] back to back in the 1-D `a` / `b`; sa [m, sum(ks) / 128]
    and sb MN-major and TMA-aligned); d[g] = c[g] for the empty groups. Validated by
    dgemm.wgrad."""
    if kernel is None:
        kernel = get_kernel(spec, a.device.index)
    num_groups, m, n = d.shape
    reduce = _reduce_into(c, d)
    groups, offset = [], 0                    # offset: tokens before group g
    for g, k in enumerate(ks):
        if k:
            groups.append((g, k, offset // BLOCK_K, a.data_ptr() + offset * m,
                           b.data_ptr() + offset * n))
        elif not reduce and c is not d:
            d[g].copy_(c[g])
        offset += k
    launch_groups(spec, m, groups, sa.data_ptr(), offset // BLOCK_K, sb.data_ptr(),
                  offset // BLOCK_K, c.data_ptr(), d.data_ptr(), num_groups, reduce, kernel)
