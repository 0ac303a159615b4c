#pragma once
// FP8 weight-gradient GEMM for sm_90a (recipe (1, 1, 128)), for one or several groups g:
//   D[g] (fp32) = C[g] + sum over K blocks kb of
//                 (A_g[M, kb] . B_g[N, kb]^T) * scale_a[m, kb] * scale_b[n, kb]
// A_g and B_g are e4m3, K-major, and BOTH carry one scale per row and 128-wide K block (K is
// the token dimension of a training step). Unlike the forward kernel (fp8_gemm.cuh), whose B
// scale is one number per 128x128 block and so per 128 output columns, here every output
// column has its own B scale: the promotion multiplies a per-row and a per-column factor.
//
// K is a run-time value per group (tokens per step; each group of the k-grouped GEMM has its
// own), so one kernel serves every K of a layer. A launch walks the tiles of up to
// kWgradMaxGroups groups (the dense GEMM is one group): each group's A and B tensor maps, K
// and place in the scale tensors travel in one __grid_constant__ parameter block.
//
// Persistent and warp-specialised: warpgroup 0 is the TMA producer (A, B and both scale
// vectors per K block into a ring of kNumStages stages), two math warpgroups own 64 rows of
// the 128-row tile each. Two epilogues, chosen per launch:
//  - reduce (N % 4 == 0, d 16-byte aligned): each warpgroup stages its 64 x BLOCK_N fp32 sums
//    in shared memory and hands them to TMA as `d += chunk` (a reduction at L2): 32-column
//    128B-swizzled chunks, and an unswizzled tail chunk of the last BLOCK_N % 32 columns
//    (8, 16 or 24: DeepGEMM-like 136/152-wide tiles), in chunk slots that a tile reuses where
//    the whole tile does not fit beside the ring (fp8_wgrad_d_slots); the host has made d
//    equal to c first (a copy unless d is c). The warpgroup goes straight on to its next tile
//    while the last reductions run, so the fp32 read-modify-write of D overlaps the next
//    tile's WGMMAs instead of stalling them.
//  - registers (any N): d = c + sum from the registers, each element read from c and written
//    to d by the same thread (so c may be d).
#include "mma_utils.cuh"
#include "tma_utils.cuh"

namespace dgemm {

// Groups per launch: their tensor maps (2 x 128 bytes each) keep the kernel's parameters
// under the classic 4 KB limit. The host splits more groups over several launches. (An
// enumerator: a namespace-scope constexpr variable makes NVRTC's cubin differ per compile,
// see kMaxCtaRegisterBudget.)
enum : uint32_t { kWgradMaxGroups = 12 };

struct Fp8WgradGroups {
    TmaDescriptor a[kWgradMaxGroups];         // A_g fp8 [M, K_g]: boxes of 128 K x BLOCK_M rows
    TmaDescriptor b[kWgradMaxGroups];         // B_g fp8 [N, K_g]: boxes of 128 K x BLOCK_N rows
    uint32_t num_k_blocks[kWgradMaxGroups];   // K_g / 128, > 0 (the host drops empty groups;
                                              // the math loop issues a tile's first K block
                                              // unconditionally)
    uint32_t k_block_offset[kWgradMaxGroups]; // g's first K block in the scale tensors
    uint32_t d_index[kWgradMaxGroups];        // g's index along c's and d's outer dimension
    uint32_t num_groups;
};

// ---- The kernel's plan, shared with Python (dgemm/kernels/hopper_wgrad.py) -------------------
struct Fp8WgradSmem {
    uint32_t d, a, b, scales_a, scales_b, full_barriers, empty_barriers, total;
};

// A stage's B scales: a TMA destination, so 128-byte aligned (BLOCK_N = 152 carries 608 bytes).
template <uint32_t BLOCK_N>
__host__ __device__ constexpr uint32_t fp8_wgrad_scales_b_stride() {
    return (BLOCK_N * 4 + 127) / 128 * 128;
}

// Tiles up to 136 columns keep two accumulator sets (K block k + 1's WGMMAs run while K block
// k is promoted). With 240 registers per math thread, 3 x 68 accumulators (136 columns) spill
// only in the tile's tail, outside the K loop; 144 and 152 columns spill inside it (10 and 36
// stores), so wider tiles promote between their WGMMAs. They free a stage's A and B as soon
// as its WGMMAs are done and read its scales afterwards, in the promotion, so their scales
// have two slots per stage, one per lap of the ring (slot = stage + lap parity x stages): the
// producer cannot come back to a slot before the stage's next release.
template <uint32_t BLOCK_N>
__host__ __device__ constexpr bool fp8_wgrad_two_accumulators() {
    return BLOCK_N <= 136;
}

// A two-accumulator tile reads the scales of the K block it retires before waiting for that
// block's WGMMAs. Read after the wait, the LDS of a 136-wide tile left the FMULs that use them
// stalled (short_sb, 35% of all warp samples; bench/NOTES.md session 22, c1..c3).
// Up to 120 columns every B-scale pair fits beside the three accumulator sets, and the reads
// go after the next K block's WGMMAs are issued. At 128 and 136 only 6 and 4 pairs fit (more
// spill with ptxas 13.0): they are read before the next K block's barrier wait, for the most
// lead, and the rest after the wait.
template <uint32_t BLOCK_N>
__host__ __device__ constexpr uint32_t fp8_wgrad_early_scale_pairs() {
    return BLOCK_N <= 120 ? BLOCK_N / 8 : BLOCK_N == 128 ? 6 : 4;
}

// The reduce epilogue stages a warpgroup's 64 x BLOCK_N sums in chunks of 64 rows x 128 bytes
// (32 columns, or the tail's BLOCK_N % 32), one TMA reduction each, in as many chunk slots as
// the pipeline leaves room for: one per chunk where they fit (the whole tile), else fewer
// (at least two), reused within the tile once TMA has read the chunk a slot held. That leaves
// the 128- and 136-wide tiles a fifth stage (a whole 128-wide tile takes 64 KB per CTA).
enum : uint32_t {
    kWgradSmemCapacity = 232448,
    kWgradChunkColumns = 32,
    kWgradChunkBytes = 64 * 128,        // a chunk slot: 64 rows x 32 fp32
};

template <uint32_t BLOCK_N>
__host__ __device__ constexpr uint32_t fp8_wgrad_d_chunks() {
    return (BLOCK_N + kWgradChunkColumns - 1) / kWgradChunkColumns;
}

// A warpgroup's slots: the whole tile (the tail's slot as large as the tail) or d_slots
// chunk slots, the tail reusing one of them.
template <uint32_t BLOCK_N>
__host__ __device__ constexpr uint32_t fp8_wgrad_d_bytes(uint32_t d_slots) {
    return d_slots == fp8_wgrad_d_chunks<BLOCK_N>() ? 64 * BLOCK_N * 4 : d_slots * kWgradChunkBytes;
}

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages>
__host__ __device__ constexpr Fp8WgradSmem fp8_wgrad_smem(uint32_t d_slots) {
    const uint32_t d = 0;                                           // 1024-aligned blocks first
    const uint32_t a = d + BLOCK_M / 64 * fp8_wgrad_d_bytes<BLOCK_N>(d_slots);
    const uint32_t b = a + kNumStages * BLOCK_M * BLOCK_K;
    const uint32_t laps = fp8_wgrad_two_accumulators<BLOCK_N>() ? 2 : 1;   // scale slots
    const uint32_t scales_a = b + kNumStages * BLOCK_N * BLOCK_K;
    const uint32_t scales_b = scales_a + laps * kNumStages * BLOCK_M * 4;
    const uint32_t full = scales_b + laps * kNumStages * fp8_wgrad_scales_b_stride<BLOCK_N>();
    const uint32_t empty = full + kNumStages * 8;
    return {d, a, b, scales_a, scales_b, full, empty, empty + kNumStages * 8};
}

// The fewest chunk slots: two (one written while TMA reads the other), one for a one-chunk tile.
template <uint32_t BLOCK_N>
__host__ __device__ constexpr uint32_t fp8_wgrad_min_d_slots() {
    return fp8_wgrad_d_chunks<BLOCK_N>() < 2 ? fp8_wgrad_d_chunks<BLOCK_N>() : 2;
}

// Chunk slots per warpgroup: the most, up to one per chunk, that fit beside kNumStages stages
// (the fewest if none fit: the plan check then fails).
template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages>
__host__ __device__ constexpr uint32_t fp8_wgrad_d_slots() {
    uint32_t slots = fp8_wgrad_d_chunks<BLOCK_N>();
    while (slots > fp8_wgrad_min_d_slots<BLOCK_N>() and
           fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>(slots).total > kWgradSmemCapacity)
        --slots;
    return slots;
}

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages>
__host__ __device__ constexpr Fp8WgradSmem fp8_wgrad_smem() {
    return fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>(
        fp8_wgrad_d_slots<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>());
}

enum : uint32_t {
    kWgradProducerThreads = 128,
    kWgradMathThreads = 256,        // two warpgroups of 64 rows: BLOCK_M is 128
};

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages,
          uint32_t kPlannedSmemBytes, uint32_t kPlannedThreads, uint32_t kPlannedGroupsBytes>
struct Fp8WgradPlanCheck {
    static_assert(fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>().total <=
                  kWgradSmemCapacity,
                  "the wgrad kernel's shared memory exceeds the 232448 bytes an sm_90 CTA may "
                  "use: fewer stages or a narrower tile");
    static_assert(fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>().total ==
                  kPlannedSmemBytes, "dgemm/kernels/hopper_wgrad.py plans a different amount "
                  "of shared memory than the kernel carves (fp8_wgrad_smem)");
    static_assert(kWgradProducerThreads + kWgradMathThreads == kPlannedThreads,
                  "dgemm/kernels/hopper_wgrad.py launches a different thread count than the "
                  "kernel's three warpgroups");
    static_assert(sizeof(Fp8WgradGroups) == kPlannedGroupsBytes,
                  "dgemm/kernels/hopper_wgrad.py packs a different group block than "
                  "Fp8WgradGroups (kWgradMaxGroups)");
};

// Run-time arguments:
//   c, d          fp32 [G, M, N], row-major (may be the same buffer); the groups' d_index
//                 select the [M, N] slices. With `reduce_into_d` d already holds c.
//   shape_m       M
//   reduce_into_d 1: the reduce epilogue (tma_d), 0: the registers epilogue (c, d)
//   groups        see Fp8WgradGroups
//   tma_scales_a  fp32 MN-major [K blocks, align(M, 4)] over every group, boxes BLOCK_M x 1
//   tma_scales_b  fp32 MN-major [K blocks, align(N, 4)] over every group, boxes BLOCK_N x 1
//   tma_d         fp32 [G, M, N], boxes of 32 columns x 64 rows x 1, 128B-swizzled
//                 (unused by the registers epilogue)
//   tma_d_tail    fp32 [G, M, N], boxes of BLOCK_N % 32 columns x 64 rows x 1, unswizzled
//                 (unused unless BLOCK_N % 32 != 0 and the reduce epilogue runs)
// Clusters of kNumMulticast (1 or 2) CTAs: a pair shares the A tile (kMulticastOnA: same
// m-block, adjacent n-blocks) or the B tile (same n-block, adjacent m-blocks); CTA 0 loads the
// shared tile and multicasts it to both, halving that operand's L2 reads. A
// pair's block past M or N (odd block counts) computes on zero-filled tiles and stores nothing.
// Grid: whole clusters, each walking cluster tiles (cluster index, + clusters, ...) over the
// groups in order, m within a group, n fastest.
template <uint32_t SHAPE_N, uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K,
          uint32_t kNumStages, uint32_t kNumSMs, uint32_t kNumMulticast, bool kMulticastOnA>
__global__ void __launch_bounds__(kWgradProducerThreads + kWgradMathThreads, 1)
fp8_wgrad_kernel(const float* c, float* d, uint32_t shape_m, uint32_t reduce_into_d,
                 const __grid_constant__ Fp8WgradGroups groups,
                 const __grid_constant__ TmaDescriptor tma_scales_a,
                 const __grid_constant__ TmaDescriptor tma_scales_b,
                 const __grid_constant__ TmaDescriptor tma_d,
                 const __grid_constant__ TmaDescriptor tma_d_tail) {
#if defined(__CUDA_ARCH__) and defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(BLOCK_K == 128, "one scale per 128-wide K block: BLOCK_K must be 128");
    static_assert(BLOCK_M == 128, "two math warpgroups of 64 rows");
    static_assert(BLOCK_N % 8 == 0 and BLOCK_N >= 32 and BLOCK_N <= 160,
                  "WGMMA widths are multiples of 8; the accumulators of 160 columns (+ the "
                  "final sums) fit the registers");
    static_assert(kNumStages >= 2, "a ring needs two stages");
    static_assert(kNumMulticast == 1 or kNumMulticast == 2, "clusters of 1 or 2 CTAs");
    constexpr uint32_t kUnitM = kNumMulticast == 2 and not kMulticastOnA ? 2 : 1;
    constexpr uint32_t kUnitN = kNumMulticast == 2 and kMulticastOnA ? 2 : 1;

    using WGMMA = WgmmaFp8<BLOCK_N>;
    constexpr uint32_t WGMMA_K = 32;
    constexpr uint32_t kNumAccum = WGMMA::kNumAccum;               // BLOCK_N / 2 per thread
    constexpr uint32_t SMEM_A_SIZE_PER_STAGE = BLOCK_M * BLOCK_K;
    constexpr uint32_t SMEM_B_SIZE_PER_STAGE = BLOCK_N * BLOCK_K;
    static_assert(SMEM_A_SIZE_PER_STAGE % 1024 == 0 and SMEM_B_SIZE_PER_STAGE % 1024 == 0,
                  "128B-swizzled tiles must stay 1024-byte aligned");
    constexpr uint32_t kStageBytes = SMEM_A_SIZE_PER_STAGE + SMEM_B_SIZE_PER_STAGE +
                                     BLOCK_M * 4 + BLOCK_N * 4;
    // The reduce epilogue: per warpgroup 64 rows x BLOCK_N fp32 as 32-column chunks of 64 rows
    // x 128 bytes, 128B-swizzled (the TMA box of tma_d), then the tail's 64 rows x kTailColumns
    // row-major (the box of tma_d_tail), chunk j in slot j % kDSlots (fp8_wgrad_d_slots). A
    // warp's 8-byte stores to 8 rows of 32 or 96 bytes meet no bank twice; rows of 64 bytes
    // (16-column tails) meet each bank twice.
    constexpr uint32_t kChunkColumns = kWgradChunkColumns, kChunkBytes = kWgradChunkBytes;
    constexpr uint32_t kFullChunks = BLOCK_N / kChunkColumns;
    constexpr uint32_t kTailColumns = BLOCK_N % kChunkColumns;
    constexpr uint32_t kNumChunks = fp8_wgrad_d_chunks<BLOCK_N>();
    constexpr uint32_t kDSlots = fp8_wgrad_d_slots<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>();
    constexpr uint32_t kWarpgroupDBytes = fp8_wgrad_d_bytes<BLOCK_N>(kDSlots);
    constexpr Fp8WgradSmem kSmem = fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>();
    constexpr uint32_t kScalesBStride = fp8_wgrad_scales_b_stride<BLOCK_N>() / 4;   // floats
    // Tiles up to 136 columns: two accumulator sets, and their scales in a slot per lap of
    // the ring (fp8_wgrad_two_accumulators); the slot of a stage filled in lap parity `phase`.
    constexpr bool kTwoAccumulators = fp8_wgrad_two_accumulators<BLOCK_N>();
    auto scale_slot = [](uint32_t stage, uint32_t phase) {
        return kTwoAccumulators ? stage + phase * kNumStages : stage;
    };
    static_assert(BLOCK_M * 4 % 128 == 0, "A's scales of a stage: a 128-byte aligned TMA box");
    static_assert(kSmem.a - kSmem.d == 2 * kWarpgroupDBytes, "a chunk ring per warpgroup");
    constexpr uint32_t kNumNUnits = ceil_div(ceil_div(SHAPE_N, BLOCK_N), kUnitN);
    constexpr uint32_t kNumMathWarps = kWgradMathThreads / 32;
    // The producer is one thread with a few addresses: 24 registers hold it, and the math
    // warpgroups' 240 (against 232) keep the 136-wide accumulator sets and schedule the
    // 128-wide loop better (bench/NOTES.md, session 19, z1: +1.7% at 128x1).
    constexpr uint32_t kNumTMARegisters = 24, kNumMathRegisters = 240;
    static_assert(128 * kNumTMARegisters + kWgradMathThreads * kNumMathRegisters <=
                  kMaxCtaRegisterBudget, "register budgets (setmaxnreg) exceed what a CTA gets");

    extern __shared__ __align__(1024) uint8_t smem_buffer[];
    uint8_t* smem_d = smem_buffer + kSmem.d;
    uint8_t* smem_a = smem_buffer + kSmem.a;
    uint8_t* smem_b = smem_buffer + kSmem.b;
    float* smem_scales_a = reinterpret_cast<float*>(smem_buffer + kSmem.scales_a);
    float* smem_scales_b = reinterpret_cast<float*>(smem_buffer + kSmem.scales_b);
    MBarrier* full_barriers = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.full_barriers);
    MBarrier* empty_barriers = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.empty_barriers);

    const uint32_t warp_idx = __shfl_sync(0xffffffff, threadIdx.x / 32, 0);
    const uint32_t lane_idx = lane_index();
    const uint32_t units_per_group = ceil_div(ceil_div(shape_m, BLOCK_M), kUnitM) * kNumNUnits;
    const uint32_t num_units = units_per_group * groups.num_groups;
    const uint32_t rank = kNumMulticast == 1 ? 0 : cluster_cta_rank();
    const uint32_t first_unit = blockIdx.x / kNumMulticast, unit_step = gridDim.x / kNumMulticast;

    if (threadIdx.x == 0) {
        tma_prefetch_descriptor(&groups.a[0]);
        tma_prefetch_descriptor(&groups.b[0]);
        tma_prefetch_descriptor(&tma_scales_a);
        tma_prefetch_descriptor(&tma_scales_b);
        if (reduce_into_d)
            tma_prefetch_descriptor(&tma_d);
        if (reduce_into_d and kTailColumns != 0)
            tma_prefetch_descriptor(&tma_d_tail);
        for (uint32_t i = 0; i < kNumStages; ++i) {
            full_barriers[i].init(1);                  // the producer's expect_tx arrive
            // One arrive per math warp of every CTA the stage's loads write into.
            empty_barriers[i].init(kNumMathWarps * kNumMulticast);
        }
        fence_view_async_shared();
        fence_barrier_init();
    }
    // The peer CTA multicasts into our shared memory: its barriers must be initialised too.
    if constexpr (kNumMulticast > 1)
        cluster_sync();
    else
        __syncthreads();

    // Cluster tile u: group u / units_per_group; within a group, bands of kBandUnits n-units,
    // each band m in order and n fastest: the CTAs running at once cover a compact block of
    // about (SMs / band) m-blocks x band n-blocks, whose A and B K-slices stay in L2 (n
    // fastest over all of N streamed all of B from DRAM once per wave: 2.2x DeepGEMM's DRAM
    // bytes, bench/NOTES.md wgrad v2). This CTA's block of the pair by its rank.
    constexpr uint32_t kBandUnits = ceil_div(16u, kUnitN);
    const uint32_t m_units = units_per_group / kNumNUnits;
    struct Tile { uint32_t group, m0, n0; };
    auto tile_at = [&](uint32_t u) {
        const uint32_t g = u / units_per_group, r = u - g * units_per_group;
        const uint32_t band = r / (m_units * kBandUnits);
        const uint32_t in_band = r - band * (m_units * kBandUnits);
        const uint32_t width = min(kBandUnits, kNumNUnits - band * kBandUnits);
        const uint32_t m_unit = in_band / width, n_unit = band * kBandUnits + in_band % width;
        const uint32_t m_block = m_unit * kUnitM + (kUnitM == 2 ? rank : 0);
        const uint32_t n_block = n_unit * kUnitN + (kUnitN == 2 ? rank : 0);
        return Tile{g, m_block * BLOCK_M, n_block * BLOCK_N};
    };

    if (threadIdx.x < kWgradProducerThreads) {
        warpgroup_reg_dealloc<kNumTMARegisters>();
        if (warp_idx == 0 and elect_one_sync()) {
            uint32_t s = 0, phase = 0;         // the ring position, carried across tiles
            for (uint32_t u = first_unit; u < num_units; u += unit_step) {
                const Tile tile = tile_at(u);
                const TmaDescriptor* map_a = &groups.a[tile.group];
                const TmaDescriptor* map_b = &groups.b[tile.group];
                const uint32_t num_k_blocks = groups.num_k_blocks[tile.group];
                const int32_t kb0 = static_cast<int32_t>(groups.k_block_offset[tile.group]);
                const int32_t m0 = static_cast<int32_t>(tile.m0);
                const int32_t n0 = static_cast<int32_t>(tile.n0);
                #pragma unroll 1
                for (uint32_t k_block = 0; k_block < num_k_blocks; ++k_block) {
                    empty_barriers[s].wait(phase ^ 1);
                    MBarrier* full = full_barriers + s;
                    // Boxes past M or N are zero-filled and still count their whole size.
                    full->arrive_expect_tx(kStageBytes);
                    const int32_t k = static_cast<int32_t>(k_block * BLOCK_K);
                    // The shared operand: CTA 0 loads the whole tile into both CTAs (one
                    // multicast), CTA 1 none of it; the other operand each CTA its own.
                    auto load = [&](const TmaDescriptor* map, uint8_t* dst, int32_t row,
                                    bool shared) {
                        if (kNumMulticast == 1 or not shared)
                            tma_load_2d(map, full, dst, k, row);
                        else if (rank == 0)
                            tma_load_2d_multicast(map, full, dst, k, row, 0b11);
                    };
                    load(map_a, smem_a + s * SMEM_A_SIZE_PER_STAGE, m0, kMulticastOnA);
                    load(map_b, smem_b + s * SMEM_B_SIZE_PER_STAGE, n0, not kMulticastOnA);
                    const uint32_t slot = scale_slot(s, phase);
                    tma_load_2d(&tma_scales_a, full, smem_scales_a + slot * BLOCK_M, m0,
                                kb0 + static_cast<int32_t>(k_block));
                    tma_load_2d(&tma_scales_b, full, smem_scales_b + slot * kScalesBStride, n0,
                                kb0 + static_cast<int32_t>(k_block));
                    if (++s == kNumStages)
                        s = 0, phase ^= 1;
                }
            }
        }
    } else {
        warpgroup_reg_alloc<kNumMathRegisters>();
        const uint32_t math_thread = threadIdx.x - kWgradProducerThreads;
        const uint32_t math_wg = __shfl_sync(0xffffffff, math_thread / 128, 0);
        const uint32_t warp_in_wg = warp_idx % 4;
        const uint32_t wg_row0 = math_wg * 64;
        // Accumulator fragment: rows r0 and r0 + 8, columns 8 * i + 2 * (lane % 4) + {0, 1}.
        const uint32_t r0 = wg_row0 + warp_in_wg * 16 + lane_idx / 4;
        const uint32_t col_in_frag = 2 * (lane_idx % 4);
        const uint32_t desc_a0 = smem_desc_k128b_lo(smem_a + wg_row0 * BLOCK_K);
        const uint32_t desc_b0 = smem_desc_k128b_lo(smem_b);
        const uint32_t barrier_id = 1 + math_wg;
        const bool store_leader = math_thread % 128 == 0;
        uint8_t* wg_smem_d = smem_d + math_wg * kWarpgroupDBytes;

        // Two accumulator sets keep the tensor cores busy through the promotion (bench/
        // NOTES.md, session 18); wider tiles promote between their WGMMAs.
        float acc0[kNumAccum], acc1[kNumAccum], final_accum[kNumAccum];
        uint32_t s = 0, phase = 0;      // the next stage to issue (the ring position)
        uint32_t s_retire = 0, phase_retire = 0;   // the oldest K block not yet promoted
        // Wait for the next stage and start its WGMMAs into `acc` (one commit group).
        auto issue = [&](auto& acc) {
            full_barriers[s].wait(phase);
            #pragma unroll
            for (uint32_t i = 0; i < kNumAccum; ++i)
                fence_operand(acc[i]);
            wgmma_fence();
            #pragma unroll
            for (uint32_t k = 0; k < BLOCK_K / WGMMA_K; ++k) {
                const uint32_t step = k * (WGMMA_K >> 4);      // 32 bytes along K
                WGMMA::mma(smem_desc_k128b(desc_a0 + s * (SMEM_A_SIZE_PER_STAGE >> 4) + step),
                           smem_desc_k128b(desc_b0 + s * (SMEM_B_SIZE_PER_STAGE >> 4) + step),
                           acc, k > 0);
            }
            wgmma_commit_group();
            #pragma unroll
            for (uint32_t i = 0; i < kNumAccum; ++i)
                fence_operand(acc[i]);
            if (++s == kNumStages)
                s = 0, phase ^= 1;
        };
        // The stage of the oldest K block is free in every CTA whose loads fill it (lane r
        // tells CTA r). Returns its scales' slot: with two slots per stage it stays valid
        // until the stage's next release; with one, the scales were read before this.
        auto release = [&]() {
            __syncwarp();
            if constexpr (kNumMulticast == 1) {
                if (lane_idx == 0)
                    empty_barriers[s_retire].arrive();
            } else if (lane_idx < kNumMulticast) {
                empty_barriers[s_retire].arrive_cluster(lane_idx);
            }
            const uint32_t slot = scale_slot(s_retire, phase_retire);
            if (++s_retire == kNumStages)
                s_retire = 0, phase_retire ^= 1;
            return slot;
        };
        // final += acc * scale_a(row) * scale_b(column): per row AND per column.
        auto promote = [&](const auto& acc, float a0, float a1, uint32_t i, float2 b) {
            final_accum[i * 4 + 0] += acc[i * 4 + 0] * (a0 * b.x);
            final_accum[i * 4 + 1] += acc[i * 4 + 1] * (a0 * b.y);
            final_accum[i * 4 + 2] += acc[i * 4 + 2] * (a1 * b.x);
            final_accum[i * 4 + 3] += acc[i * 4 + 3] * (a1 * b.y);
        };
        // This thread's B scales in a slot (pair i at + i * 8), and its two A scales.
        auto scales_b = [&](uint32_t slot) {
            return smem_scales_b + slot * kScalesBStride + col_in_frag;
        };
        auto scales = [&](uint32_t slot, float& a0, float& a1) {
            const float* sa = smem_scales_a + slot * BLOCK_M;
            a0 = sa[r0], a1 = sa[r0 + 8];
            return scales_b(slot);
        };
        // The oldest K block's scales, read before its WGMMAs are waited for (A's two and the
        // first kEarlyPairs of B's; fp8_wgrad_early_scale_pairs). The fences keep them there.
        constexpr uint32_t kEarlyPairs = fp8_wgrad_early_scale_pairs<BLOCK_N>();
        constexpr bool kEarlyBeforeIssue = kEarlyPairs < kNumAccum / 4;
        struct EarlyScales { float a0, a1; float2 b[kEarlyPairs]; };
        auto read_early_scales = [&]() {
            EarlyScales early;
            const float* sb = scales(scale_slot(s_retire, phase_retire), early.a0, early.a1);
            #pragma unroll
            for (uint32_t i = 0; i < kEarlyPairs; ++i)
                early.b[i] = *reinterpret_cast<const float2*>(sb + i * 8);
            fence_operand(early.a0), fence_operand(early.a1);
            #pragma unroll
            for (uint32_t i = 0; i < kEarlyPairs; ++i)
                fence_operand(early.b[i].x), fence_operand(early.b[i].y);
            return early;
        };
        // The oldest K block's group is complete: free its stage, then promote it.
        auto retire = [&](auto& acc, const EarlyScales& early) {
            #pragma unroll
            for (uint32_t i = 0; i < kNumAccum; ++i)
                fence_operand(acc[i]);
            const float* sb = scales_b(release());
            #pragma unroll
            for (uint32_t i = 0; i < kNumAccum / 4; ++i)
                promote(acc, early.a0, early.a1, i, i < kEarlyPairs ? early.b[i] :
                        *reinterpret_cast<const float2*>(sb + i * 8));
        };
        // Issue the next K block into `next`, then retire the oldest (in `oldest`).
        auto overlap = [&](auto& next, auto& oldest) {
            EarlyScales early;
            if constexpr (kEarlyBeforeIssue)
                early = read_early_scales();
            issue(next);
            if constexpr (not kEarlyBeforeIssue)
                early = read_early_scales();
            wgmma_wait_group<1>();
            retire(oldest, early);
        };
        // Retire the last K block in flight.
        auto drain = [&](auto& oldest) {
            const EarlyScales early = read_early_scales();
            wgmma_wait_group<0>();
            retire(oldest, early);
        };
        for (uint32_t u = first_unit; u < num_units; u += unit_step) {
            const Tile tile = tile_at(u);
            const uint32_t num_k_blocks = groups.num_k_blocks[tile.group];
            #pragma unroll
            for (uint32_t i = 0; i < kNumAccum; ++i)
                final_accum[i] = 0.0f;

            if constexpr (kTwoAccumulators) {
                // K blocks in pairs, the even one in acc0, the odd one in acc1. At every loop
                // boundary exactly K block `k_block` (acc0) is in flight and after the tail
                // none: ptxas can prove it and keeps the WGMMAs asynchronous (a tail inside
                // the loop made it serialise them, C7514).
                issue(acc0);
                uint32_t k_block = 0;
                #pragma unroll 1
                for (; k_block + 2 < num_k_blocks; k_block += 2) {
                    overlap(acc1, acc0);
                    overlap(acc0, acc1);
                }
                if (k_block + 1 < num_k_blocks) {
                    overlap(acc1, acc0);
                    drain(acc1);
                } else {
                    drain(acc0);
                }
            } else {
                #pragma unroll 1
                for (uint32_t k_block = 0; k_block < num_k_blocks; ++k_block) {
                    issue(acc0);
                    // The scales, read while the WGMMAs run and before the stage is freed.
                    float a0, a1;
                    const float* sb = scales(scale_slot(s_retire, phase_retire), a0, a1);
                    float2 b[kNumAccum / 4];
                    #pragma unroll
                    for (uint32_t i = 0; i < kNumAccum / 4; ++i)
                        b[i] = *reinterpret_cast<const float2*>(sb + i * 8);
                    #pragma unroll
                    for (uint32_t i = 0; i < kNumAccum; ++i)
                        fence_operand(acc0[i]);
                    wgmma_wait_group<0>();
                    release();
                    #pragma unroll
                    for (uint32_t i = 0; i < kNumAccum / 4; ++i)
                        promote(acc0, a0, a1, i, b[i]);
                }
            }

            const uint32_t d_index = groups.d_index[tile.group];
            if (reduce_into_d) {
                // Registers -> 128B-swizzled chunks (the 16-byte unit of column c in row r
                // sits at unit (c / 4) ^ (r % 8)) -> one TMA `d += chunk` per 32 columns, then
                // the tail's columns row-major -> one `d += tail`; a bulk group per chunk.
                // Chunks 0 .. kDSlots - 1 fill the slots at once; chunk j past them waits
                // until TMA has read chunk j - kDSlots from its slot.
                const uint32_t row = warp_in_wg * 16 + lane_idx / 4;
                const uint32_t byte_in_unit = (lane_idx % 2) * 8;
                auto slot_of = [&](uint32_t j) { return wg_smem_d + (j % kDSlots) * kChunkBytes; };
                auto write_chunk = [&](uint32_t j) {
                    uint8_t* chunk = slot_of(j);
                    if (j < kFullChunks) {
                        #pragma unroll
                        for (uint32_t i = j * 4; i < j * 4 + 4; ++i) {
                            const uint32_t unit = (i % 4) * 2 + (lane_idx % 4) / 2;
                            const uint32_t offset = ((unit ^ (row % 8)) * 16) + byte_in_unit;
                            *reinterpret_cast<float2*>(chunk + row * 128 + offset) =
                                make_float2(final_accum[i * 4 + 0], final_accum[i * 4 + 1]);
                            *reinterpret_cast<float2*>(chunk + (row + 8) * 128 + offset) =
                                make_float2(final_accum[i * 4 + 2], final_accum[i * 4 + 3]);
                        }
                    } else {
                        float* tail = reinterpret_cast<float*>(chunk);
                        #pragma unroll
                        for (uint32_t i = kFullChunks * 4; i < kNumAccum / 4; ++i) {
                            const uint32_t col = (i - kFullChunks * 4) * 8 + col_in_frag;
                            *reinterpret_cast<float2*>(tail + row * kTailColumns + col) =
                                make_float2(final_accum[i * 4 + 0], final_accum[i * 4 + 1]);
                            *reinterpret_cast<float2*>(tail + (row + 8) * kTailColumns + col) =
                                make_float2(final_accum[i * 4 + 2], final_accum[i * 4 + 3]);
                        }
                    }
                };
                auto reduce_chunk = [&](uint32_t j) {      // the store leader
                    const uint32_t n0 = tile.n0 + j * kChunkColumns;
                    if (tile.m0 + wg_row0 < shape_m and n0 < SHAPE_N)
                        tma_reduce_add_3d(j < kFullChunks ? &tma_d : &tma_d_tail, slot_of(j),
                                          static_cast<int32_t>(n0),
                                          static_cast<int32_t>(tile.m0 + wg_row0),
                                          static_cast<int32_t>(d_index));
                    tma_store_commit();               // a group per chunk, even an empty one
                };
                if (store_leader)
                    tma_store_wait<true>();           // the last tile's reductions read them
                named_barrier_sync(barrier_id, 128);
                #pragma unroll
                for (uint32_t j = 0; j < kDSlots; ++j)
                    write_chunk(j);
                fence_view_async_shared();            // generic writes -> TMA reads
                named_barrier_sync(barrier_id, 128);
                if (store_leader) {
                    #pragma unroll
                    for (uint32_t j = 0; j < kDSlots; ++j)
                        reduce_chunk(j);
                }
                #pragma unroll
                for (uint32_t j = kDSlots; j < kNumChunks; ++j) {
                    // Groups committed: chunks 0 .. j - 1; chunk j - kDSlots is read once at
                    // most kDSlots - 1 are pending.
                    if (store_leader)
                        tma_store_wait<true, kDSlots - 1>();
                    named_barrier_sync(barrier_id, 128);
                    write_chunk(j);
                    fence_view_async_shared();
                    named_barrier_sync(barrier_id, 128);
                    if (store_leader)
                        reduce_chunk(j);
                }
                continue;
            }

            // Registers epilogue: d = c + final, fp32 (rows past M and columns past N are
            // never touched). Each element is read from c and written to d by this thread
            // only, so c may be d.
            #pragma unroll
            for (uint32_t h = 0; h < 2; ++h) {
                const uint32_t row = tile.m0 + r0 + h * 8;
                if (row >= shape_m)
                    continue;
                const uint64_t base = (static_cast<uint64_t>(d_index) * shape_m + row) * SHAPE_N;
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum / 4; ++i) {
                    const uint32_t col = tile.n0 + i * 8 + col_in_frag;
                    const float v0 = final_accum[i * 4 + h * 2 + 0];
                    const float v1 = final_accum[i * 4 + h * 2 + 1];
                    if constexpr (SHAPE_N % 2 == 0) {
                        // Even N: col is even, so col < N implies col + 1 < N; 8-byte aligned.
                        if (col < SHAPE_N) {
                            const float2 old = *reinterpret_cast<const float2*>(c + base + col);
                            *reinterpret_cast<float2*>(d + base + col) =
                                make_float2(old.x + v0, old.y + v1);
                        }
                    } else {
                        if (col < SHAPE_N)
                            d[base + col] = c[base + col] + v0;
                        if (col + 1 < SHAPE_N)
                            d[base + col + 1] = c[base + col + 1] + v1;
                    }
                }
            }
        }
        // Shared memory must outlive the last reductions' reads of it.
        if (reduce_into_d and store_leader)
            tma_store_wait<false>();
    }

    // Neither CTA of a cluster may exit while its peer can still write into its shared
    // memory or arrive on its barriers.
    if constexpr (kNumMulticast > 1) {
        __syncwarp();
        cluster_sync();
    }
#else
    // This kernel needs wgmma/setmaxnreg: it only has a body when compiled for sm_90a.
    asm volatile("trap;");
#endif
}

}  // namespace dgemm
