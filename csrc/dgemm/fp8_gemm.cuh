#pragma once
// FP8 block-scaled GEMM for sm_90a: D[M,N] (bf16) = A[M,K] (e4m3, 1x128 scales) . B[N,K]^T
// (e4m3, 128x128 scales), plus the grouped contiguous / masked MoE variants.
//
// Persistent, warp-specialised: warpgroup 0 is the TMA producer filling a kNumStages ring of
// shared-memory stages (full/empty mbarriers per stage) that runs on from tile to tile; in
// 2-CTA clusters each producer loads half of the shared operand (A, or B for the plain GEMM
// and the contiguous layout) and multicasts it to both CTAs. The math warpgroups (one per 64 rows of the tile) run FP8
// WGMMA on each 128-wide K block into a temporary FP32 accumulator and promote it into the
// final accumulator with the A and B scales of that block. The epilogue
// stages the bf16 tile in shared memory and writes it with TMA stores (plain GEMM, tiles of
// 64-column multiples) or with coalesced 16-byte stores that skip rows that must not be
// written (M tail, padding rows, masked rows). The plain GEMM can also run in K-split pairs:
// two CTAs of a cluster per tile, each half of its K blocks, adding their partial sums through
// distributed shared memory before each stores half of the columns (kNumKSplit).
#include "mma_utils.cuh"
#include "scheduler.cuh"
#include "tma_utils.cuh"

namespace dgemm {

template <uint32_t BLOCK_N>
struct EpilogueLayout {
    // Row pitch of the staged bf16 tile: a multiple of 16 bytes (vector reads) whose word
    // count is 4 mod 8, so the 8 rows a warp writes at once fall into distinct banks.
    static constexpr uint32_t kPitchBytes = BLOCK_N * 2 + (BLOCK_N % 16 == 0 ? 16 : 0);
};

// ---- The kernel's plan, shared with Python -----------------------------------------------------
// dgemm/kernels/hopper_fp8.py reserves shared memory, launches threads and builds the TMA store
// descriptor from its own copy of these numbers; the generated translation unit instantiates
// `Fp8GemmPlanCheck` with Python's numbers, so a difference fails the compile instead of
// corrupting shared memory.

// TMA-store epilogue (128B-swizzled boxes of 64 bf16 columns): 16-byte output rows and tiles of
// whole 64-column chunks.
__host__ __device__ constexpr bool fp8_gemm_tma_store(uint32_t shape_n, uint32_t block_n) {
    return shape_n % 8 == 0 and block_n % 64 == 0;
}

// Rows of A that the last m-block of a plain GEMM loads when M is not a multiple of the tile
// height (the `tma_a_tail` descriptor's box; Python builds it with the same number): only its
// M % BLOCK_M real rows. The rest of that A stage keeps stale bytes, whose output rows are never
// stored, instead of TMA zero fill, which slows every SM of the run (NOTES: bench/NOTES.md
// v24). Clusters sharing A load slices of whole tiles: they keep the zero fill.
__host__ __device__ constexpr uint32_t fp8_gemm_a_tail_rows(bool plain, bool multicast_on_a,
                                                            uint32_t shape_m, uint32_t block_m) {
    return plain and not multicast_on_a and shape_m % block_m != 0 ? shape_m % block_m : block_m;
}

// Tiles that divide 128 columns always sit inside one B-scale block.
__host__ __device__ constexpr bool fp8_gemm_uniform_scale_b(uint32_t block_n) {
    return 128 % block_n == 0;
}

// Byte offsets of each shared-memory region, in carving order; `total` is the dynamic shared
// memory the kernel needs.
struct Fp8GemmSmem {
    uint32_t a, b, scales_a, full_barriers, empty_barriers, scales_b_full, scales_b_empty,
             exchange_full, exchange_free, scales_b, tiles, total;
};

// A tile of the grouped layouts as the B-scale loader warp stages it for the math warpgroups,
// beside the tile's B scales (two slots): its coordinates and one bit per row that is a real
// output row, so that the math warpgroups read no global memory between tiles (group indices,
// row checks). A slot whose m_block is kNoTile ends the math warpgroups' loop.
struct alignas(16) StagedTile {
    static constexpr uint32_t kNoTile = 0xffffffffu;
    uint32_t m_block, n_block, group;
    uint32_t shares_operand;          // Scheduler::shares_operand (contiguous pairs)
    uint32_t row_mask[12];            // bit r % 32 of word r / 32: row r (tiles up to 384 rows)
};
static_assert(sizeof(StagedTile) == 64, "fp8_gemm_smem and hopper_fp8.py count 64 bytes");

template <uint32_t SHAPE_K, uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K,
          uint32_t kNumStages, uint32_t kNumKSplit = 1>
__host__ __device__ constexpr Fp8GemmSmem fp8_gemm_smem() {
    constexpr uint32_t kBarrierBytes = 8;
    // A CTA of a K-split pair holds the B scales of its own K blocks only.
    constexpr uint32_t kNumKBlocks = SHAPE_K / BLOCK_K / kNumKSplit;
    // The staged output tile comes first (offset 0), then the stage ring.
    const uint32_t a = BLOCK_M * EpilogueLayout<BLOCK_N>::kPitchBytes;
    const uint32_t b = a + kNumStages * BLOCK_M * BLOCK_K;             // fp8: 1 byte each
    const uint32_t scales_a = b + kNumStages * BLOCK_N * BLOCK_K;
    const uint32_t full = scales_a + kNumStages * BLOCK_M * 4;
    const uint32_t empty = full + kNumStages * kBarrierBytes;
    const uint32_t sb_full = empty + kNumStages * kBarrierBytes;
    const uint32_t sb_empty = sb_full + 2 * kBarrierBytes;
    // K-split pairs: a full and a free barrier per math warpgroup for the partial-sum
    // exchange (none otherwise).
    const uint32_t xchg_full = sb_empty + 2 * kBarrierBytes;
    const uint32_t xchg_free = xchg_full + (kNumKSplit > 1 ? 2 : 0) * kBarrierBytes;
    const uint32_t scales_b = xchg_free + (kNumKSplit > 1 ? 2 : 0) * kBarrierBytes;
    // Two slots of a tile's B scales: K/128 floats per 128-column scale block it touches.
    const uint32_t scales_b_per_tile =
        kNumKBlocks * (fp8_gemm_uniform_scale_b(BLOCK_N) ? 1 : 2);
    // Two staged tiles (one per B-scale slot), 16-byte aligned.
    const uint32_t tiles = (scales_b + 2 * scales_b_per_tile * 4 + 15) / 16 * 16;
    return {a, b, scales_a, full, empty, sb_full, sb_empty, xchg_full, xchg_free, scales_b,
            tiles, tiles + 2 * static_cast<uint32_t>(sizeof(StagedTile))};
}

// The math warpgroups of a tile: one per 64 rows (three for 192 rows), two for the 64-row
// split-K tile.
__host__ __device__ constexpr uint32_t fp8_gemm_math_threads(uint32_t block_m) {
    return block_m == 192 ? 384 : 256;
}

// Instantiated by the generated source with Python's plan (kPlanned*): each number Python
// launches with must be the kernel's own.
template <uint32_t SHAPE_N, uint32_t SHAPE_K, uint32_t BLOCK_M, uint32_t BLOCK_N,
          uint32_t BLOCK_K, uint32_t kNumStages, uint32_t kPlannedSmemBytes,
          uint32_t kPlannedThreads, bool kPlannedTMAStore, uint32_t kNumKSplit>
struct Fp8GemmPlanCheck {
    static_assert(fp8_gemm_smem<SHAPE_K, BLOCK_M, BLOCK_N, BLOCK_K, kNumStages,
                                kNumKSplit>().total <=
                  232448, "the kernel's shared memory exceeds the 232448 bytes an sm_90 CTA "
                  "may use: fewer stages or a smaller tile");
    static_assert(fp8_gemm_smem<SHAPE_K, BLOCK_M, BLOCK_N, BLOCK_K, kNumStages,
                                kNumKSplit>().total ==
                  kPlannedSmemBytes, "dgemm/kernels/hopper_fp8.py plans a different amount of "
                  "shared memory than the kernel carves (fp8_gemm_smem)");
    static_assert(128 + fp8_gemm_math_threads(BLOCK_M) == kPlannedThreads,
                  "dgemm/kernels/hopper_fp8.py launches a different thread count than the "
                  "kernel's warpgroups (fp8_gemm_math_threads)");
    static_assert(fp8_gemm_tma_store(SHAPE_N, BLOCK_N / kNumKSplit) == kPlannedTMAStore,
                  "dgemm/kernels/hopper_fp8.py disagrees with the kernel on whether D is "
                  "stored through TMA (fp8_gemm_tma_store)");
};

template <GemmType kGemmType, uint32_t SHAPE_N, uint32_t SHAPE_K, uint32_t kNumGroups,
          uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages,
          uint32_t kNumTMAMulticast, bool kIsTMAMulticastOnA, uint32_t kNumSMs,
          uint32_t kNumMathThreads, uint32_t kNumKSplit>
__global__ void __launch_bounds__(128 + kNumMathThreads, 1)
fp8_gemm_kernel(uint16_t* d, const float* scales_b, const int32_t* grouped_layout,
                const float* scales_a, uint32_t shape_m, uint32_t sa_in_place,
                uint64_t sa_row_stride, uint64_t sa_k_stride, uint64_t sa_group_stride,
                const __grid_constant__ TmaDescriptor tma_a,
                const __grid_constant__ TmaDescriptor tma_a_tail,
                const __grid_constant__ TmaDescriptor tma_b,
                const __grid_constant__ TmaDescriptor tma_scales_a,
                const __grid_constant__ TmaDescriptor tma_d) {
#if defined(__CUDA_ARCH__) and defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // ---- Checks -------------------------------------------------------------------------
    static_assert(BLOCK_K == 128, "one FP8 scale per 128-wide K block: BLOCK_K must be 128");
    static_assert(SHAPE_K % BLOCK_K == 0, "K must be a multiple of 128");
    static_assert(BLOCK_M == 64 or BLOCK_M == 128 or BLOCK_M == 192 or BLOCK_M == 256,
                  "WGMMA tiles are 64 rows per warpgroup (two waves of them for 256 rows)");
    static_assert(kNumMathThreads == fp8_gemm_math_threads(BLOCK_M),
                  "two math warpgroups (three for 192-row tiles)");
    static_assert(BLOCK_N % 8 == 0 and BLOCK_N >= 8 and BLOCK_N <= 256, "WGMMA N granularity");
    static_assert(BLOCK_N + 128 - gcd(BLOCK_N, 128u) <= 256,
                  "a tile may span at most two 128-column B-scale blocks");
    static_assert(kNumTMAMulticast == 1 or kNumTMAMulticast == 2,
                  "clusters of 2 CTAs share A tiles (same m-block, adjacent n-blocks) or, for "
                  "the plain GEMM and the contiguous layout, B tiles (same n-block, adjacent "
                  "m-blocks)");
    static_assert(kGemmType == GemmType::Normal or kNumGroups >= 1, "group count");
    static_assert(kNumKSplit == 1 or (kNumKSplit == 2 and kGemmType == GemmType::Normal and
                                      kNumTMAMulticast == 1 and BLOCK_M == 128 and
                                      (SHAPE_K / BLOCK_K) % 2 == 0),
                  "K-split pairs: the plain GEMM, 128-row tiles, no multicast, an even number "
                  "of K blocks");

    // ---- Types and sizes ----------------------------------------------------------------
    // 256-column tiles run as two 128-column waves per K block through one 64-register
    // temporary accumulator (a 256-wide one plus the final accumulator would not fit the
    // registers). NOTES: ~12% fewer shared-memory bytes per FLOP than 128x128 tiles (A read
    // twice, B once per warpgroup, TMA writes); +8..10% on the large shapes (bench/NOTES.md v12).
    constexpr uint32_t kNumNWaves = BLOCK_N == 256 ? 2 : 1;
    constexpr uint32_t WAVE_N = BLOCK_N / kNumNWaves;
    static_assert(kNumNWaves == 1 or BLOCK_M == 128,
                  "256-column tiles: two math warpgroups of 64 rows each");
    // 256-row tiles likewise run as two 128-row waves per K block: warpgroup w takes rows
    // 64 w and 128 + 64 w, one temporary accumulator. The plain GEMM only (the grouped
    // layouts' row masks describe one 64-row block per warpgroup), at most 128 columns.
    // NOTES: DeepGEMM's large-M tile (256x128 sharing A); the transposed 128x256 took its
    // cycles, but N quantizes by 128 instead of 256 (bench/NOTES.md session 35).
    constexpr uint32_t kNumMWaves = BLOCK_M == 256 ? 2 : 1;
    constexpr uint32_t kMWaveRows = 128;
    static_assert(kNumMWaves == 1 or (kGemmType == GemmType::Normal and kNumNWaves == 1 and
                                      kNumKSplit == 1),
                  "256-row tiles: the plain GEMM, at most 128 columns, no K split");
    constexpr uint32_t kNumWaves = kNumNWaves * kNumMWaves;
    using WGMMA = WgmmaFp8<WAVE_N>;
    constexpr uint32_t WGMMA_M = 64, WGMMA_K = 32;
    // A cluster of kNumKSplit CTAs may split each tile's K blocks (K-split pairs: CTA rank r
    // takes the r-th half of them and the pair adds its partial sums through distributed
    // shared memory before the epilogue, each CTA storing half of the tile's columns). NOTES:
    // the small-M shapes read B from HBM once whoever loads it, while each CTA of a one-wave
    // grid re-reads all of A from L2; a pair halves those bytes per CTA. They pay with long K
    // and few tiles (bench/NOTES.md d1, e1, e2).
    constexpr uint32_t kNumKBlocksTotal = SHAPE_K / BLOCK_K;     // B-scale row pitch
    constexpr uint32_t kNumKBlocks = kNumKBlocksTotal / kNumKSplit;   // this CTA's share
    constexpr uint32_t kNumScaleRowsB = ceil_div(SHAPE_N, 128u);
    // TMA-store epilogue (128B-swizzled boxes of 64 bf16 columns): for the plain GEMM the
    // tensor bounds clip exactly the rows and columns that must not be written; the grouped
    // layouts use it for each warpgroup's 64 rows when all of them are real output rows, and
    // checked stores otherwise (padding rows, masked-off rows).
    // The epilogue's width: the tile's, or the half a CTA of a K-split pair stores.
    constexpr uint32_t EPI_N = BLOCK_N / kNumKSplit;
    constexpr bool kTMAStore = fp8_gemm_tma_store(SHAPE_N, EPI_N);
    constexpr bool kUniformScaleB = fp8_gemm_uniform_scale_b(BLOCK_N);
    // A tile that straddles two B-scale blocks promotes its columns before `split_col` with
    // the first block's scale and the rest with the second's. Where n_start % 128 takes at most
    // 4 values (widths that are multiples of 32), the main loop of 128-row tiles is compiled
    // once per value and the per-column choice is a constant. NOTES: chosen at run time it
    // cost ~80 instructions per K block at 128x192 (FSEL, ISETP, FMUL, predicates kept in
    // registers, a spill) and ~40 between the first two WGMMAs at 128x96; DeepGEMM's loop has
    // none (bench/NOTES.md p1). The 64-row split-K tiles keep the run-time choice: their short
    // tiles switch copies at every tile (masked 8 x 8 rows, 7168x2048 at 64x160: 6% slower).
    constexpr uint32_t kSplitStep = gcd(BLOCK_N, 128u);
    constexpr bool kStaticSplit = not kUniformScaleB and kNumNWaves == 1 and BLOCK_M >= 128 and
                                  128 / kSplitStep <= 4;
    constexpr uint32_t kNumAccum = WGMMA::kNumAccum;                  // WAVE_N / 2 per thread
    constexpr uint32_t kNumFinalAccum = kNumAccum * kNumWaves;         // BLOCK_N / 2 per wave
    // One 64-row block's share (per M wave): EPI_N / 2.
    constexpr uint32_t kNumEpiAccum = kNumAccum * kNumNWaves / kNumKSplit;
    constexpr uint32_t SMEM_D_PITCH = EpilogueLayout<BLOCK_N>::kPitchBytes;
    constexpr uint32_t SMEM_D_SIZE = BLOCK_M * SMEM_D_PITCH;
    constexpr uint32_t SMEM_A_SIZE_PER_STAGE = BLOCK_M * BLOCK_K;      // fp8: 1 byte each
    // With multicast each CTA of the pair loads one slice of the shared tile for both.
    constexpr uint32_t kASliceRows = kIsTMAMulticastOnA ? BLOCK_M / kNumTMAMulticast : BLOCK_M;
    constexpr uint32_t kBSliceRows = kIsTMAMulticastOnA ? BLOCK_N : BLOCK_N / kNumTMAMulticast;
    static_assert(kASliceRows % 8 == 0 and kBSliceRows % 8 == 0,
                  "multicast slices must be whole 1024-byte swizzle atoms");
    constexpr uint32_t SMEM_B_SIZE_PER_STAGE = BLOCK_N * BLOCK_K;
    constexpr uint32_t SMEM_SCALES_A_SIZE_PER_STAGE = BLOCK_M * sizeof(float);
    // What TMA writes into a stage: A, B and, unless `sa_in_place`, A's scales (in place,
    // they arrive through the A-scale loader's cp.async instead).
    constexpr uint32_t kStageBytes =
        SMEM_A_SIZE_PER_STAGE + SMEM_B_SIZE_PER_STAGE + SMEM_SCALES_A_SIZE_PER_STAGE;
    static_assert(SMEM_SCALES_A_SIZE_PER_STAGE == BLOCK_M * 4 and BLOCK_M % 32 == 0,
                  "the A-scale loader's lanes each copy BLOCK_M / 32 rows' scales");
    constexpr uint32_t kScalesAPerLane = BLOCK_M / 32;
    static_assert(SMEM_D_SIZE % 1024 == 0, "A/B tiles after D must stay 1024-byte aligned");
    static_assert(SMEM_A_SIZE_PER_STAGE % 1024 == 0 and SMEM_B_SIZE_PER_STAGE % 1024 == 0,
                  "128B-swizzled tiles must be 1024-byte aligned");
    constexpr Fp8GemmSmem kSmem =
        fp8_gemm_smem<SHAPE_K, BLOCK_M, BLOCK_N, BLOCK_K, kNumStages, kNumKSplit>();
    static_assert(sizeof(MBarrier) == 8, "fp8_gemm_smem counts 8 bytes per barrier");
    static_assert(kSmem.a == SMEM_D_SIZE and kSmem.total <= 232448,
                  "the output tile heads shared memory; all of it fits one sm_90 CTA");

    // The math warpgroups either split the tile's rows (64 each) or, for 64-row tiles, run
    // one of two kinds of chain over its K blocks: warpgroup 0 alone, pipelined (below), or a
    // pair that splits them (those of the even / odd stages) and adds its partial sums at the
    // end. NOTES: one warpgroup's issue -> wait -> promote chain costs ~400..450 clk per K
    // block however small the tile; two independent chains halve that on the latency-bound
    // small-M shapes.
    constexpr bool kSplitK = BLOCK_M == 64;
    // Wider 64-row tiles (past 128 columns) of few K blocks run one plain chain (warpgroup 0
    // takes every stage, warpgroup 1 only passes the B-scale slots on): the hand-over of
    // partial sums is a fixed ~0.2..0.3 us per tile that the second chain does not win back.
    // NOTES (g4, g5: same rounds, one chain against the pair): +0.5..9% at 2..8 K blocks a
    // tile (7 of 8 shapes), -0.3..-2.6% at 12..56 (bench/NOTES.md session 27).
    // The pipelined chain keeps two K blocks in flight: the WGMMAs of block k + 1 go out (into
    // the second accumulator) before block k is waited for and promoted, so the promotion
    // leaves the chain, and there are no partial sums to hand over at the end. NOTES (session
    // 33, m1, m2): per K block with the data there, the plain one chain ~390 clk, the pipelined
    // one ~310, the pair ~195 for both; but the pair's hand-over costs ~530 clk a tile. SM
    // cycles against the pair: 1.8..3.5% fewer on 5 of 8 small-M shapes, the rest the same.
    // Two accumulators and the final one (1.5 x BLOCK_N registers) fit 232 up to 128 columns.
    constexpr bool kPipelinedChain = kSplitK and kNumStages >= 2 and BLOCK_N <= 128;
    constexpr bool kOneChain = kSplitK and (kPipelinedChain or kNumKBlocks <= 8);
    // Only the pair splits the stages (by parity); a chain takes them all, so any count.
    static_assert(kOneChain or not kSplitK or kNumStages % 2 == 0 or kNumStages == 1,
                  "a pair gives each math warpgroup half of the stages: an even count");
    constexpr uint32_t kNumConsumerWarps = kSplitK ? 4 : kNumMathThreads / 32;

    // ---- Pipeline ring --------------------------------------------------------------------
    // The K blocks of consecutive tiles run through the ring of kNumStages stages without a
    // break, so the producer loads the next tile's first K blocks while the math warpgroups
    // finish this one. NOTES: restarting every tile at stage 0 (slots past its last K block left
    // empty) drained the pipeline at each tile boundary whenever K blocks % stages != 0
    // (~500 clk per tile on 128x256 tiles, bench/NOTES.md v18b).
    // The math warpgroups walk the ring in laps of kNumStages slots, each lap unrolled so that
    // every stage's barrier, descriptor and scale address is a compile-time offset. NOTES: with
    // the stage computed at run time, ~90 integer instructions per K block sat on each
    // warpgroup's issue chain (ncu, bench/NOTES.md v9). A tile that does not start at stage 0
    // enters its first lap part-way and leaves its last lap early (one guarded copy of the lap).
    constexpr bool kRingRotates = kNumKBlocks % kNumStages != 0;
    // The TMA producer walks the ring in unrolled laps (compile-time stage: ~33 instructions
    // per K block against ~46 one K block at a time) only for the narrowest tiles, whose math
    // per K block is short enough for the producer to set the pace. NOTES (s5, s7: same
    // rounds as DeepGEMM, laps against none): 64x16 1.072 vs 0.970 (64x2112x7168), 64x32
    // 1.063 vs 0.995 (128x2112x7168) and 1.025 vs 1.026 (64x4096x7168); wider tiles lost with
    // them: 64x48 0.942 vs 0.976 (64x6144x4096), 64x56 0.999 vs 1.022 (64x7168x16384), 128x32
    // 0.914 vs 0.942 (128x4096x7168), the 128x256 contiguous tile 0.953 vs 0.991 (the laps'
    // code: ~200..900 instructions more).
    constexpr bool kProducerLaps = BLOCK_M * BLOCK_N <= 64 * 32;
    // Plain GEMM, one CTA per tile: the thread that initialises the barriers issues the loads
    // of its first tile's first two stages at once, before the CTA-wide barrier and before the
    // producer warp reaches its own loop (whose first lap then starts past them). NOTES
    // (per-CTA event clocks, bench/NOTES.md session 32): the producer's first load left ~1.5k
    // cycles after the CTA's entry, DeepGEMM's ~1.0k, and on the one-wave small-M rows each
    // cycle before it is a cycle of the whole call: 4..8% fewer SM cycles there. The whole
    // ring issued this way was worse: the B-scale loads queued behind it.
    constexpr uint32_t kNumEarlyStages =
        kGemmType == GemmType::Normal and kNumTMAMulticast * kNumKSplit == 1 and
        not kProducerLaps ? (kNumKBlocks < 2 ? kNumKBlocks : 2) : 0;
    constexpr uint32_t kNumScalesBPerTile = kNumKBlocks * (kUniformScaleB ? 1 : 2);
    // B scales each loader lane holds in registers per chunk (one global round trip per chunk
    // of 32 * kScalesBPerLane K blocks; the producer warpgroup has 40 registers).
    constexpr uint32_t kMaxScalesBPerLane = kUniformScaleB ? 8 : 4;
    constexpr uint32_t kScalesBPerLane = ceil_div(kNumKBlocks, 32u) < kMaxScalesBPerLane ?
                                         ceil_div(kNumKBlocks, 32u) : kMaxScalesBPerLane;

    // ---- Register budgets (setmaxnreg) --------------------------------------------------
    // 128 * kNumTMARegisters + kNumMathThreads * kNumMathRegisters within the CTA's budget.
    constexpr uint32_t kNumTMARegisters = 40;
    constexpr uint32_t kNumMathRegisters = kNumMathThreads == 384 ? 152 : 232;
    static_assert(128 * kNumTMARegisters + kNumMathThreads * kNumMathRegisters <=
                  kMaxCtaRegisterBudget, "register budgets (setmaxnreg) exceed what a CTA gets");
    static_assert(kNumTMARegisters % 8 == 0 and kNumMathRegisters % 8 == 0 and
                  kNumTMARegisters >= 24 and kNumMathRegisters <= 256,
                  "setmaxnreg takes multiples of 8 in 24..256");
    // Named barriers: 1..3 epilogue (one per warpgroup), 5 split-K reduction, 6 B scales staged.
    constexpr uint32_t kReduceBarrier = 5;

    // ---- Shared memory carving ----------------------------------------------------------
    extern __shared__ __align__(1024) uint8_t smem_buffer[];
    uint8_t* smem_d = smem_buffer;
    uint8_t* smem_a = smem_buffer + kSmem.a;
    uint8_t* smem_b = smem_buffer + kSmem.b;
    float* smem_scales_a = reinterpret_cast<float*>(smem_buffer + kSmem.scales_a);
    MBarrier* full_barriers = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.full_barriers);
    MBarrier* empty_barriers = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.empty_barriers);
    // The B scales of a tile (one or two 128-column rows of K/128 floats) are staged in one of
    // two slots by a loader warp one tile ahead of the math warpgroups.
    MBarrier* scales_b_full = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.scales_b_full);
    MBarrier* scales_b_empty = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.scales_b_empty);
    float* smem_scales_b = reinterpret_cast<float*>(smem_buffer + kSmem.scales_b);
    StagedTile* staged_tiles = reinterpret_cast<StagedTile*>(smem_buffer + kSmem.tiles);
    // K-split pairs, per math warpgroup: the peer's partial sums have arrived in this CTA's
    // staging rows (full), and the peer's staging rows may take ours (free).
    MBarrier* exchange_full = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.exchange_full);
    MBarrier* exchange_free = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.exchange_free);
    // This CTA's K blocks start at k_offset; `peer` is the other CTA of a K-split pair.
    const uint32_t k_rank = kNumKSplit > 1 ? cluster_cta_rank() : 0;
    const uint32_t k_offset = k_rank * kNumKBlocks, peer = k_rank ^ 1;
    static_assert(BLOCK_M <= 32 * 12, "StagedTile holds one bit per row of the tile");

    const uint32_t warp_idx = __shfl_sync(0xffffffff, threadIdx.x / 32, 0);
    const uint32_t lane_idx = lane_index();

    // The last m-block of a plain GEMM loads only its real rows of A (see
    // fp8_gemm_a_tail_rows): whether a tile's m-block is that tail, and the bytes each of its
    // stages receives (A's scales arrive through the loader warp's cp.async when in place).
    const uint32_t tail_rows = fp8_gemm_a_tail_rows(
        kGemmType == GemmType::Normal, kIsTMAMulticastOnA and kNumTMAMulticast > 1, shape_m,
        BLOCK_M);
    auto is_a_tail = [&](uint32_t m_block) {
        return tail_rows != BLOCK_M and m_block == (shape_m - 1) / BLOCK_M;
    };
    auto stage_bytes_of = [&](bool tail) -> uint32_t {
        return kStageBytes - (tail ? (BLOCK_M - tail_rows) * BLOCK_K : 0u) -
               (sa_in_place ? SMEM_SCALES_A_SIZE_PER_STAGE : 0u);
    };

    // ---- Descriptor prefetch and barrier init -------------------------------------------
    if (threadIdx.x == 0) {
        tma_prefetch_descriptor(&tma_a);
        tma_prefetch_descriptor(&tma_a_tail);
        tma_prefetch_descriptor(&tma_b);
        if (not sa_in_place)
            tma_prefetch_descriptor(&tma_scales_a);
        if constexpr (kTMAStore)
            tma_prefetch_descriptor(&tma_d);
        for (uint32_t i = 0; i < kNumStages; ++i) {
            // The producer's expect_tx arrive (and, in place, one cp.async arrive per A-scale
            // loader lane).
            full_barriers[i].init(sa_in_place ? 1 + 32 : 1);
            // One arrive per math warp of every CTA that reads what this CTA's TMA writes.
            empty_barriers[i].init(kNumConsumerWarps * kNumTMAMulticast);
        }
        for (uint32_t i = 0; i < 2; ++i) {
            scales_b_full[i].init(32);                         // every loader lane
            scales_b_empty[i].init(kNumMathThreads / 32);      // every math warp
            if constexpr (kNumKSplit > 1) {
                exchange_full[i].init(1);                      // the store leader's expect_tx
                exchange_free[i].init(1);                      // the peer's store leader
            }
        }
        fence_view_async_shared();
        fence_barrier_init();
        if constexpr (kNumEarlyStages > 0) {
            uint32_t m0, n0, g0;
            auto first = Scheduler<kGemmType, SHAPE_N, BLOCK_M, BLOCK_N, kNumGroups,
                                   kNumTMAMulticast, kIsTMAMulticastOnA, kNumKSplit>(
                shape_m, grouped_layout);
            if (first.next(m0, n0, g0)) {
                const bool tail = is_a_tail(m0);
                const uint32_t bytes = stage_bytes_of(tail);
                #pragma unroll
                for (uint32_t s = 0; s < kNumEarlyStages; ++s) {
                    const int32_t k = static_cast<int32_t>(s * BLOCK_K);
                    full_barriers[s].arrive_expect_tx(bytes);
                    tma_load_2d(tail ? &tma_a_tail : &tma_a, full_barriers + s,
                                smem_a + s * SMEM_A_SIZE_PER_STAGE, k,
                                static_cast<int32_t>(m0 * BLOCK_M));
                    tma_load_2d(&tma_b, full_barriers + s, smem_b + s * SMEM_B_SIZE_PER_STAGE, k,
                                static_cast<int32_t>(n0 * BLOCK_N));
                    if (not sa_in_place)
                        tma_load_2d(&tma_scales_a, full_barriers + s, smem_scales_a + s * BLOCK_M,
                                    static_cast<int32_t>(m0 * BLOCK_M), static_cast<int32_t>(s));
                }
            }
        }
    }
    // The peer CTA multicasts into our shared memory: its barriers must be initialised too.
    if constexpr (kNumTMAMulticast * kNumKSplit > 1)
        cluster_sync();
    else
        __syncthreads();

    // A consumer warp's arrive on stage `s`'s empty barrier in cluster CTA `cta` (lane `cta`
    // arrives; without multicast only lane 0, locally).
    auto release_stage = [](MBarrier* empty, uint32_t cta) {
        if constexpr (kNumTMAMulticast == 1)
            empty->arrive();
        else
            empty->arrive_cluster(cta);
    };

    // First B-scale row of a tile, and the row its columns past `split_col` use (the same row
    // unless the tile straddles two 128-column scale blocks).
    auto scale_b_rows = [&](uint32_t n_block, uint32_t group, const float*& lo, const float*& hi) {
        const uint32_t n_start = n_block * BLOCK_N;
        // (A cluster's extra n-block past N is never stored; clamp its scale row.)
        lo = scales_b +
            (group * kNumScaleRowsB + min(n_start / 128, kNumScaleRowsB - 1)) * kNumKBlocksTotal;
        const bool straddles = not kUniformScaleB and (n_start % 128) + BLOCK_N > 128 and
                               n_start / 128 + 1 < kNumScaleRowsB;
        hi = straddles ? lo + kNumKBlocksTotal : lo;
    };

    auto scheduler = Scheduler<kGemmType, SHAPE_N, BLOCK_M, BLOCK_N, kNumGroups,
                               kNumTMAMulticast, kIsTMAMulticastOnA, kNumKSplit>(
        shape_m, grouped_layout);
    uint32_t m_block, n_block, group;
    // Grouped layouts: the B-scale loader warp stages each tile (StagedTile) for the producer
    // and the math warpgroups, whose scheduler would read global memory between two tiles.
    constexpr bool kStagesTiles = kGemmType != GemmType::Normal;

    if (threadIdx.x < 128) {
        // ==== TMA producer warpgroup =====================================================
        warpgroup_reg_dealloc<kNumTMARegisters>();
        // One elected thread issues every load. Elected with elect.sync (not `lane == 0`), its
        // per-K-block chain stays in uniform registers: no register-to-uniform moves or
        // per-TMA ELECT loops. NOTES: the `lane == 0` producer issued one K block per ~340 clk
        // and was the bound of the small-M shapes (64x2112x7168: 12.9 -> 9.2 us with this and
        // the intrinsic smem_addr, bench/NOTES.md v21).
        // The whole warp walks the tiles and the ring (its waits included) and a lane elected
        // per K block issues the arrive and the loads: the loop state and the tile's values
        // are warp-uniform and stay in uniform registers. NOTES (s5): elected once for the
        // whole loop, they sat in vector registers, ~9 R2UR per K block (49..55 instructions
        // per K block against DeepGEMM's ~29), and the producer set the pace of the 64-row
        // split-K tiles (full-barrier waits polled 1.18 times each).
        if (warp_idx == 0) {
            // phase flips at every wrap of the ring; the first tile's early stages are issued.
            uint32_t stage = kNumEarlyStages % kNumStages;
            uint32_t phase = kNumEarlyStages == kNumStages ? 1 : 0;
            [[maybe_unused]] uint32_t k_start = kNumEarlyStages;
            // The next tile: the scheduler's (plain GEMM), or the staged one. NOTES: reading
            // the group indices itself, the producer left a ~1 us gap in a 3-stage ring at
            // every tile (bench/NOTES.md r2).
            uint32_t tile_count = 0;
            bool shares_operand = true;
            auto next_tile = [&]() -> bool {
                if constexpr (not kStagesTiles) {
                    return scheduler.next(m_block, n_block, group);
                } else {
                    const uint32_t slot = tile_count % 2;
                    scales_b_full[slot].wait((tile_count / 2) & 1);
                    ++tile_count;
                    const uint4 head = *reinterpret_cast<const uint4*>(staged_tiles + slot);
                    m_block = head.x, n_block = head.y, group = head.z;
                    shares_operand = head.w != 0;
                    return m_block != StagedTile::kNoTile;
                }
            };
            while (next_tile()) {
                const bool tail = is_a_tail(m_block);
                const TmaDescriptor* desc_a = tail ? &tma_a_tail : &tma_a;
                const uint32_t stage_bytes = stage_bytes_of(tail);
                const int32_t a_row = static_cast<int32_t>(scheduler.global_row(m_block, group));
                const int32_t b_row = static_cast<int32_t>(
                    (kGemmType == GemmType::Normal ? 0 : group * SHAPE_N) + n_block * BLOCK_N);
                // TMA-loaded A scales are MN-major: [K/128 (x groups), rows]; masked groups
                // stack along K.
                const int32_t sa_col = static_cast<int32_t>(m_block * BLOCK_M);
                const int32_t sa_row_base = static_cast<int32_t>(
                    (kGemmType == GemmType::GroupedMasked ? group * kNumKBlocksTotal : 0) +
                    k_offset);

                // `laps`: the stage is a compile-time constant and `buf` (smem_buffer made
                // opaque once per lap) the base of immediate offsets; else a run-time stage
                // and the carved pointers.
                auto produce = [&](uint32_t s, uint32_t k_block, uint8_t* buf, auto laps) {
                    constexpr bool kLaps = decltype(laps)::value;
                    if constexpr (kLaps)
                        reinterpret_cast<MBarrier*>(buf + kSmem.empty_barriers)[s].wait(phase ^ 1);
                    else
                        empty_barriers[s].wait(phase ^ 1);
                    if (not elect_one_sync())
                        return;
                    MBarrier* full = kLaps ? reinterpret_cast<MBarrier*>(buf + kSmem.full_barriers) + s
                                           : full_barriers + s;
                    full->arrive_expect_tx(stage_bytes);
                    const int32_t k = static_cast<int32_t>((k_offset + k_block) * BLOCK_K);
                    // The shared operand: this CTA's slice, multicast to every CTA of the
                    // cluster (the whole tile, locally, without multicast). A contiguous pair
                    // in two groups loads every slice of its own B (same bytes expected).
                    auto load = [&](const TmaDescriptor* desc, uint8_t* dst, int32_t row,
                                    bool shared, uint32_t slice_rows) {
                        if (kNumTMAMulticast == 1 or not shared) {
                            tma_load_2d(desc, full, dst, k, row);
                        } else if (kGemmType == GemmType::GroupedContiguous and
                                   not shares_operand) {
                            #pragma unroll
                            for (uint32_t r = 0; r < kNumTMAMulticast; ++r)
                                tma_load_2d(desc, full, dst + r * slice_rows * BLOCK_K, k,
                                            row + static_cast<int32_t>(r * slice_rows));
                        } else {
                            const uint32_t slice = scheduler.rank * slice_rows;
                            tma_load_2d_multicast(desc, full, dst + slice * BLOCK_K, k,
                                                  row + static_cast<int32_t>(slice),
                                                  (1u << kNumTMAMulticast) - 1);
                        }
                    };
                    load(desc_a, (kLaps ? buf + kSmem.a : smem_a) + s * SMEM_A_SIZE_PER_STAGE,
                         a_row, kIsTMAMulticastOnA, kASliceRows);
                    load(&tma_b, (kLaps ? buf + kSmem.b : smem_b) + s * SMEM_B_SIZE_PER_STAGE,
                         b_row, not kIsTMAMulticastOnA, kBSliceRows);
                    const int32_t sa_row = sa_row_base + static_cast<int32_t>(k_block);
                    if (sa_in_place)
                        return;
                    if constexpr (kLaps)
                        tma_load_2d(&tma_scales_a, full,
                                    buf + kSmem.scales_a + s * SMEM_SCALES_A_SIZE_PER_STAGE,
                                    sa_col, sa_row);
                    else
                        tma_load_2d(&tma_scales_a, full, smem_scales_a + s * BLOCK_M, sa_col,
                                    sa_row);
                };
                if constexpr (not kProducerLaps) {
                    // One K block at a time: the producer runs ahead of the math warpgroups.
                    #pragma unroll 1
                    for (uint32_t k_block = k_start; k_block < kNumKBlocks; ++k_block) {
                        produce(stage, k_block, nullptr, Constant<0>{});
                        if (++stage == kNumStages)
                            stage = 0, phase ^= 1;
                    }
                    k_start = 0;
                } else {
                    // The ring in laps of kNumStages slots, each lap unrolled, walked as the
                    // math warpgroups walk it: a tile that does not start at stage 0 enters its
                    // first lap part-way and leaves its last lap early, through one guarded
                    // copy of the lap (slots [lo, hi) hold K blocks k0 + slot). Same loads,
                    // barriers and order as one K block at a time.
                    auto lap = [&](uint32_t k0, uint32_t lo, uint32_t hi, auto guarded) {
                        constexpr bool kGuarded = decltype(guarded)::value;
                        if (kGuarded and lo >= hi)
                            return;               // one branch, as the math warpgroups do
                        uint8_t* const buf = smem_buffer + opaque(0u);
                        #pragma unroll
                        for (uint32_t s = 0; s < kNumStages; ++s) {
                            if (kGuarded and s >= hi)
                                break;
                            if (not kGuarded or s >= lo)
                                produce(s, k0 + s, buf, Constant<1>{});
                        }
                    };
                    if constexpr (not kRingRotates) {
                        #pragma unroll 1
                        for (uint32_t k0 = 0; k0 < kNumKBlocks; k0 += kNumStages, phase ^= 1)
                            lap(k0, 0, kNumStages, Constant<0>{});
                    } else {
                        const uint32_t head =
                            stage == 0 ? 0 : min(kNumKBlocks, kNumStages - stage);
                        const uint32_t num_laps = (kNumKBlocks - head) / kNumStages;
                        uint32_t lo = stage, hi = stage + head, k0 = 0u - stage;
                        #pragma unroll 1
                        for (uint32_t part = 0; part < 2; ++part) {
                            lap(k0, lo, hi, Constant<1>{});
                            if (hi == kNumStages)
                                phase ^= 1;
                            if (part == 1)
                                break;
                            #pragma unroll 1
                            for (uint32_t l = 0; l < num_laps; ++l, phase ^= 1)
                                lap(head + l * kNumStages, 0, kNumStages, Constant<0>{});
                            k0 = head + num_laps * kNumStages;
                            lo = 0, hi = kNumKBlocks - k0;
                        }
                        stage = (stage + kNumKBlocks) % kNumStages;
                    }
                }
            }
        } else if (warp_idx == 1) {
            // B-scale loader: global -> shared one tile ahead, so that no math warpgroup waits
            // on a global load at the start of a tile. NOTES: loaded by the math threads
            // themselves, the round trip cost ~1000..2000 clk of idle tensor cores per tile.
            // Grouped layouts: it also stages the tile itself (StagedTile), which the producer
            // and the math warpgroups take instead of walking the scheduler. NOTES: the math
            // warpgroups' reads of group indices and row checks between two tiles' WGMMAs cost
            // 2..4% (contiguous, bench/NOTES.md r1).
            uint32_t tile_count = 0;
            while (true) {
                const uint32_t slot = tile_count % 2, parity = (tile_count / 2) & 1;
                ++tile_count;
                StagedTile* staged = staged_tiles + slot;
                if (not scheduler.next(m_block, n_block, group)) {
                    if constexpr (kStagesTiles) {
                        scales_b_empty[slot].wait(parity ^ 1);
                        if (lane_idx == 0)
                            staged->m_block = StagedTile::kNoTile;
                        scales_b_full[slot].arrive();
                    }
                    break;
                }
                // One bit per real output row (issued before the slot wait, like the scales).
                uint32_t row_mask[BLOCK_M / 32];
                #pragma unroll
                for (uint32_t j = 0; j < BLOCK_M / 32; ++j)
                    row_mask[j] = kStagesTiles ? __ballot_sync(
                        0xffffffff, scheduler.row_valid(m_block, group, j * 32 + lane_idx)) : 0u;
                const float *sb_lo, *sb_hi;
                scale_b_rows(n_block, group, sb_lo, sb_hi);
                sb_lo += k_offset, sb_hi += k_offset;
                float* sfb = smem_scales_b + slot * kNumScalesBPerTile;
                // Every load of a chunk is issued before the first store, so a chunk costs one
                // global round trip (a loop storing each value before the next load cost one per
                // 32 K blocks: two cold HBM trips before the first promotion at K = 7168). The
                // first chunk's loads are in flight while the slot is still being read.
                // NOTES: +3..4% on the one-wave small-M shapes (bench/NOTES.md v21).
                constexpr uint32_t kChunk = 32 * kScalesBPerLane;
                #pragma unroll 1
                for (uint32_t k0 = 0; k0 < kNumKBlocks; k0 += kChunk) {
                    float lo[kScalesBPerLane], hi[kScalesBPerLane];
                    #pragma unroll
                    for (uint32_t j = 0; j < kScalesBPerLane; ++j) {
                        const uint32_t i = k0 + j * 32 + lane_idx;
                        if (i < kNumKBlocks) {
                            lo[j] = __ldg(sb_lo + i);
                            if constexpr (not kUniformScaleB)
                                hi[j] = __ldg(sb_hi + i);
                        }
                    }
                    if (k0 == 0) {
                        scales_b_empty[slot].wait(parity ^ 1);
                        if (kStagesTiles and lane_idx == 0) {
                            staged->m_block = m_block;
                            staged->n_block = n_block;
                            staged->group = group;
                            staged->shares_operand = scheduler.shares_operand;
                        }
                        #pragma unroll
                        for (uint32_t j = 0; j < BLOCK_M / 32; ++j)
                            if (kStagesTiles and lane_idx == j)
                                staged->row_mask[j] = row_mask[j];
                    }
                    #pragma unroll
                    for (uint32_t j = 0; j < kScalesBPerLane; ++j) {
                        const uint32_t i = k0 + j * 32 + lane_idx;
                        if (i < kNumKBlocks) {
                            sfb[i] = lo[j];
                            if constexpr (not kUniformScaleB)
                                sfb[kNumKBlocks + i] = hi[j];
                        }
                    }
                }
                scales_b_full[slot].arrive();                // release: the stores above
            }
        } else if (warp_idx == 2 and sa_in_place) {
            // A-scale loader for scales in any other layout than the MN-major TMA-aligned one
            // (which the producer loads with TMA): each K block's scales of the tile's rows,
            // global -> shared with 4-byte cp.async per row, whose completion arrives on the
            // stage's full barrier (cp.async.mbarrier.arrive.noinc: 32 of the barrier's
            // arrivals). Any strides: the row-major scales `per_token_cast_to_fp8` returns are
            // read in place, so a call needs no transposing copy (a TMA box of one K block
            // cannot read that layout: its inner extent must be 16 bytes). Not used for the
            // MN-major layout: there it cost 2..20% against TMA (bench/NOTES.md h2).
            uint32_t stage = 0, phase = 0;
            const uint32_t smem_sa = smem_addr(smem_scales_a) + lane_idx * 4;
            while (scheduler.next(m_block, n_block, group)) {
                const uint32_t row0 = m_block * BLOCK_M + lane_idx;
                const float* lane_sa = scales_a + row0 * sa_row_stride +
                    (kGemmType == GemmType::GroupedMasked ? group * sa_group_stride : 0);
                // Rows past M are zero-filled (no bytes read).
                uint32_t valid = 0;
                #pragma unroll
                for (uint32_t j = 0; j < kScalesAPerLane; ++j)
                    valid |= (row0 + j * 32 < shape_m ? 1u : 0u) << j;
                #pragma unroll 1
                for (uint32_t k_block = 0; k_block < kNumKBlocks; ++k_block) {
                    empty_barriers[stage].wait(phase ^ 1);
                    // One running pointer down the lane's rows: the producer warpgroup has 40
                    // registers, and six precomputed row addresses spilled (masked layout).
                    const float* src = lane_sa + (k_offset + k_block) * sa_k_stride;
                    const uint32_t dst = smem_sa + stage * BLOCK_M * 4;
                    #pragma unroll
                    for (uint32_t j = 0; j < kScalesAPerLane; ++j) {
                        const bool real = (valid >> j) & 1u;
                        cp_async_4_zfill(dst + j * 32 * 4, real ? src : scales_a,
                                         real ? 4u : 0u);
                        src += 32 * sa_row_stride;
                    }
                    cp_async_arrive_noinc(full_barriers + stage);
                    if (++stage == kNumStages)
                        stage = 0, phase ^= 1;
                }
            }
            cp_async_wait_all();
        }
    } else {
        // ==== WGMMA math warpgroups ======================================================
        warpgroup_reg_alloc<kNumMathRegisters>();
        const uint32_t math_thread = threadIdx.x - 128;
        const uint32_t math_wg = __shfl_sync(0xffffffff, math_thread / 128, 0);
        const uint32_t warp_in_wg = warp_idx % 4;
        const uint32_t wg_row0 = kSplitK ? 0 : math_wg * WGMMA_M;   // this warpgroup's rows
        // Accumulator fragment: rows r0 and r0 + 8, columns 8 * i + 2 * (lane % 4) + {0, 1}.
        const uint32_t r0 = wg_row0 + warp_in_wg * 16 + lane_idx / 4;
        // Low words of the stage-0 descriptors; stage s and K step k add constants.
        const uint32_t desc_a0 = smem_desc_k128b_lo(smem_a + wg_row0 * BLOCK_K);
        const uint32_t desc_b0 = smem_desc_k128b_lo(smem_b);
        const uint32_t scales_a_addr = smem_addr(smem_scales_a + r0);   // stage 0, row r0

        float accum[kNumAccum * (kPipelinedChain ? 2 : 1)], final_accum[kNumFinalAccum];
        uint32_t phase = 0, tile_count = 0;
        uint32_t exchange_phase = 0;       // K-split pairs: flips at every tile
        uint32_t first_stage = 0;          // stage of the current tile's first K block

        // One tile: its B scales in slot `scales_slot`, `rows` which of this warpgroup's 64
        // rows are real output rows (grouped layouts).
        auto compute_tile = [&](uint32_t scales_slot, uint2 rows) {
            const float* sfb = smem_scales_b + scales_slot * kNumScalesBPerTile;
            const uint32_t n_start = n_block * BLOCK_N;
            const uint32_t split_col = 128 - n_start % 128;   // first column of the second
                                                              // B-scale row (if it straddles)

            #pragma unroll
            for (uint32_t i = 0; i < kNumFinalAccum; ++i)
                final_accum[i] = 0.0f;

            // Grouped layouts: a warpgroup none of whose 64 rows is an output row (padding
            // rows, masked-off rows) only passes the stages on, leaving the tensor cores to the
            // other warpgroups. Each warp decides alone (same answer, no barrier). NOTES: about
            // one tile in five of the contiguous layout with ~256-row groups (bench/NOTES.md v13).
            bool idle = false;
            if constexpr (not kSplitK and kGemmType != GemmType::Normal)
                idle = (rows.x | rows.y) == 0;

            // Split-K tiles: warpgroup w takes the ring's stages of parity w (whatever K block
            // they hold), so each warpgroup waits on every phase of its own stages and on no
            // other. NOTES: owned by K-block parity, a stage changed hands between laps whenever
            // the stage count or the K blocks per tile were odd; a warpgroup then waited on a
            // stage two fills after the one it saw last, the parity wait passed one phase early,
            // and the kernel ended in "unspecified launch failure" (bench/NOTES.md v23).
            auto owns = [&](uint32_t stage) {
                return not kSplitK or (kOneChain ? math_wg == 0 : stage % 2 == math_wg);
            };

            // final (wave w) += acc * (scale_a(row) * scale_b(column block)), with the four
            // products of the two rows and the two B-scale blocks.
            auto promote = [&](auto split, uint32_t w, const float* acc, float s0_lo,
                               float s1_lo, float s0_hi, float s1_hi) {
                float* final_wave = final_accum + w * kNumAccum;
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum / 4; ++i) {
                    // Tiles that never straddle two scale blocks skip the per-column
                    // select; a 128-column wave of a 256-column tile uses one row.
                    const bool lo = kUniformScaleB or
                                    (kNumNWaves > 1 ? w == 0 : i * 8 < split.value);
                    const float s0 = lo ? s0_lo : s0_hi, s1 = lo ? s1_lo : s1_hi;
                    final_wave[i * 4 + 0] += s0 * acc[i * 4 + 0];
                    final_wave[i * 4 + 1] += s0 * acc[i * 4 + 1];
                    final_wave[i * 4 + 2] += s1 * acc[i * 4 + 2];
                    final_wave[i * 4 + 3] += s1 * acc[i * 4 + 3];
                }
            };

            // Stage s's WGMMAs (wave w of the tile's columns) into `acc`, as one group.
            auto issue = [&](uint32_t s, uint32_t w, float* acc, float& a0, float& a1) {
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum; ++i)
                    fence_operand(acc[i]);
                wgmma_fence();
                #pragma unroll
                for (uint32_t k = 0; k < BLOCK_K / WGMMA_K; ++k) {
                    // Advancing 32 bytes along K inside a swizzled row: +2 in 16-byte units.
                    const uint32_t step = k * (WGMMA_K >> 4);
                    const uint32_t a_wave = kNumMWaves > 1 ? w * ((kMWaveRows * BLOCK_K) >> 4) : 0;
                    const uint32_t b_wave = kNumNWaves > 1 ? w * ((WAVE_N * BLOCK_K) >> 4) : 0;
                    WGMMA::mma(smem_desc_k128b(desc_a0 + s * (SMEM_A_SIZE_PER_STAGE >> 4) +
                                               a_wave + step),
                               smem_desc_k128b(desc_b0 + s * (SMEM_B_SIZE_PER_STAGE >> 4) +
                                               b_wave + step),
                               acc, k > 0);
                }
                wgmma_commit_group();
                // Keep the scale products after the issue: hoisted above it, they made the
                // WGMMAs wait for the scale loads.
                fence_operand(a0), fence_operand(a1);
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum; ++i)
                    fence_operand(acc[i]);
            };

            // One slot of the ring: wait for it, issue its WGMMAs, release it and promote:
            // final += acc * scale_a(row) * scale_b(column block).
            // `split.value`: the tile's first column in its second B-scale block (a Constant
            // where the tile width allows few values, see kStaticSplit; else a RuntimeValue).
            // `sa_addr`: scales_a_addr made opaque once per round, so that each stage's A-scale
            // address is an immediate offset instead of a register kept (or spilled) per stage.
            auto consume = [&](auto split, uint32_t s, uint32_t k_block, uint32_t sa_addr) {
                const float b_lo = sfb[k_block];
                const float b_hi = kUniformScaleB ? b_lo : sfb[kNumKBlocks + k_block];
                full_barriers[s].wait(phase);
                // Scales are read before the stage is released (the producer refills it) and
                // before the WGMMAs, which hide their latency.
                // Rows r0 and r0 + 8 of each M wave.
                float a0[kNumMWaves], a1[kNumMWaves];
                #pragma unroll
                for (uint32_t w = 0; w < kNumMWaves; ++w) {
                    a0[w] = ld_shared_f32(sa_addr + (s * BLOCK_M + w * kMWaveRows) * 4);
                    a1[w] = ld_shared_f32(sa_addr + (s * BLOCK_M + w * kMWaveRows + 8) * 4);
                }
                #pragma unroll
                for (uint32_t w = 0; w < kNumWaves; ++w) {
                    const uint32_t mw = kNumMWaves > 1 ? w : 0;
                    issue(s, w, accum, a0[mw], a1[mw]);
                    wgmma_wait_group<0>();

                    // Hand the stage back to every CTA whose producer writes into it.
                    if (w == kNumWaves - 1 and lane_idx < kNumTMAMulticast)
                        release_stage(empty_barriers + s, lane_idx);

                    promote(split, w, accum, a0[mw] * b_lo, a1[mw] * b_lo, a0[mw] * b_hi,
                            a1[mw] * b_hi);
                }
            };

            // The pipelined chain (kPipelinedChain): the stage's WGMMAs go into accumulator
            // s % 2 (consecutive K blocks of a lap alternate; every lap starts drained, so the
            // ring may be odd); then the previous K block's group is waited for (wait_group
            // 1), its stage released and its products promoted. The last block of each lap is
            // drained (below).
            float prev_s0_lo = 0.0f, prev_s1_lo = 0.0f, prev_s0_hi = 0.0f, prev_s1_hi = 0.0f;
            bool pending = false;              // a K block issued but not promoted
            uint32_t pending_stage = 0;        // its stage
            auto consume_pipelined = [&](auto split, uint32_t s, uint32_t k_block,
                                         uint32_t sa_addr) {
                const float b_lo = sfb[k_block];
                const float b_hi = kUniformScaleB ? b_lo : sfb[kNumKBlocks + k_block];
                full_barriers[s].wait(phase);
                float a0 = ld_shared_f32(sa_addr + s * BLOCK_M * 4);
                float a1 = ld_shared_f32(sa_addr + (s * BLOCK_M + 8) * 4);
                float* prev = accum + ((s + 1) % 2) * kNumAccum;
                issue(s, 0, accum + (s % 2) * kNumAccum, a0, a1);
                // Waited for on every path (a no-op at the tile's first block): ptxas
                // serialises every WGMMA if any path may touch an accumulator in flight.
                wgmma_wait_group<1>();
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum; ++i)
                    fence_operand(prev[i]);
                if (pending) {
                    if (lane_idx < kNumTMAMulticast)
                        release_stage(empty_barriers + (s + kNumStages - 1) % kNumStages, lane_idx);
                    promote(split, 0, prev, prev_s0_lo, prev_s1_lo, prev_s0_hi, prev_s1_hi);
                }
                prev_s0_lo = a0 * b_lo, prev_s1_lo = a1 * b_lo;
                prev_s0_hi = a0 * b_hi, prev_s1_hi = a1 * b_hi;
                pending = true, pending_stage = s;
            };
            // The end of every lap (a loop's back edge): the last K block is waited for and
            // promoted. NOTES (session 33): ptxas serialises every WGMMA of a kernel in which
            // a group stays in flight across a loop's back edge while other instructions read
            // accumulators (FlashAttention 3 also waits at the end of each iteration).
            auto drain = [&]() {
                if constexpr (kPipelinedChain) {
                    wgmma_wait_group<0>();
                    #pragma unroll
                    for (uint32_t i = 0; i < 2 * kNumAccum; ++i)
                        fence_operand(accum[i]);
                    if (pending) {
                        if (lane_idx < kNumTMAMulticast)
                            release_stage(empty_barriers + pending_stage, lane_idx);
                        // Two copies: each indexes its accumulator with constants (registers).
                        if (pending_stage % 2 == 0)
                            promote(RuntimeValue{split_col}, 0, accum, prev_s0_lo, prev_s1_lo,
                                    prev_s0_hi, prev_s1_hi);
                        else
                            promote(RuntimeValue{split_col}, 0, accum + kNumAccum, prev_s0_lo,
                                    prev_s1_lo, prev_s0_hi, prev_s1_hi);
                        pending = false;
                    }
                }
            };

            // A slot this warpgroup does not compute on: wait for it and hand it back.
            auto pass = [&](uint32_t s, uint32_t, uint32_t) {
                full_barriers[s].wait(phase);
                if (lane_idx < kNumTMAMulticast)
                    release_stage(empty_barriers + s, lane_idx);
            };
            // The tile's K blocks through the ring (`slot(stage, k_block, sa_addr)` each).
            // Whole laps run unguarded, unrolled (constant addresses, no branch on the issue
            // chain); a tile that does not start at stage 0 also has a partial first lap and
            // a partial last lap, which share one guarded copy of the lap (compile time).
            auto full_laps = [&](auto&& slot, uint32_t k0, uint32_t num_laps) {
                for (uint32_t lap = 0; lap < num_laps; ++lap, phase ^= 1) {
                    const uint32_t sa_addr = opaque(scales_a_addr);
                    #pragma unroll
                    for (uint32_t s = 0; s < kNumStages; ++s)
                        if (owns(s))
                            slot(s, k0 + lap * kNumStages + s, sa_addr);
                    drain();
                }
            };
            // The pipelined chain's accumulators alternate with the stage's parity, which holds
            // only if the slots of a guarded lap run without gaps (they do: [lo, hi)). ptxas
            // cannot see that and serialises every WGMMA unless each path that skips a slot
            // has nothing in flight: there, where the real paths already have none, wait.
            auto settle = [&]() {
                if constexpr (kPipelinedChain)
                    wgmma_wait_group<0>();
            };
            auto walk = [&](auto&& slot) {
                if constexpr (not kRingRotates) {
                    full_laps(slot, 0, kNumKBlocks / kNumStages);
                } else {
                    // Slots [lo, hi) of a lap hold K blocks k0 + stage: first the tail of the
                    // lap the previous tile ended in, last the start of the next tile's lap.
                    const uint32_t head = first_stage == 0 ? 0 :
                                          min(kNumKBlocks, kNumStages - first_stage);
                    const uint32_t num_laps = (kNumKBlocks - head) / kNumStages;
                    uint32_t lo = first_stage, hi = first_stage + head, k0 = 0u - first_stage;
                    #pragma unroll 1
                    for (uint32_t part = 0; part < 2; ++part) {
                        const uint32_t sa_addr = opaque(scales_a_addr);
                        // An empty part is one branch, and the slots past `hi` one jump out:
                        // testing each slot's guard hopped from slot to slot through code
                        // that runs once per tile. NOTES: on the one-wave shapes every CTA
                        // reaches that cold code at once; its instruction-fetch misses were
                        // ~10% of the warp samples at 384x4096x8192 (bench/NOTES.md d2).
                        if (lo < hi) {
                            #pragma unroll
                            for (uint32_t s = 0; s < kNumStages; ++s) {
                                if (s >= hi) {
                                    settle();
                                    break;
                                }
                                if (s >= lo and owns(s))
                                    slot(s, k0 + s, sa_addr);
                                else
                                    settle();
                            }
                            drain();
                        }
                        if (hi == kNumStages)
                            phase ^= 1;
                        if (part == 1)
                            break;
                        full_laps(slot, head, num_laps);
                        k0 = head + num_laps * kNumStages;
                        lo = 0, hi = kNumKBlocks - k0;
                    }
                    first_stage = (first_stage + kNumKBlocks) % kNumStages;
                }
            };
            // Separate copies of the loop keep the branches out of the per-K-block issue chain.
            if (idle) {
                walk(pass);
            } else if constexpr (kPipelinedChain) {
                static_assert(not kStaticSplit and kNumNWaves == 1,
                              "the pipelined chain: 64-row tiles, one wave");
                if (math_wg == 0) {
                    walk([&](uint32_t s, uint32_t k_block, uint32_t sa_addr) {
                        consume_pipelined(RuntimeValue{split_col}, s, k_block, sa_addr);
                    });
                } else {
                    walk(pass);     // owns no stage: only the ring's phase moves on
                }
            } else if constexpr (kStaticSplit) {
                // One copy per value of n_start % 128 (a multiple of kSplitStep).
                dispatch_constant<0, kSplitStep, 128>(n_start % 128, [&](auto residue) {
                    constexpr uint32_t kSplit = 128 - decltype(residue)::value;
                    walk([&](uint32_t s, uint32_t k_block, uint32_t sa_addr) {
                        consume(Constant<kSplit>{}, s, k_block, sa_addr);
                    });
                });
            } else {
                walk([&](uint32_t s, uint32_t k_block, uint32_t sa_addr) {
                    consume(RuntimeValue{split_col}, s, k_block, sa_addr);
                });
            }
            // Every K block is promoted: the loader may refill this tile's B-scale slot.
            __syncwarp();
            if (lane_idx == 0)
                scales_b_empty[scales_slot].arrive();
            if (idle)
                return;                     // no row of this warpgroup is written

            if constexpr (kSplitK and not kOneChain) {
                // Warpgroup 1 hands its partial sums to warpgroup 0 through the (free) output
                // staging buffer, half the fragment at a time, in fragment order: thread t of
                // both warpgroups holds the same elements, so each access is conflict-free.
                constexpr uint32_t kHalf = kNumFinalAccum / 2;
                static_assert(kHalf * 128 * 4 <= SMEM_D_SIZE, "staging buffer holds half");
                float* exchange = reinterpret_cast<float*>(smem_d);
                const uint32_t t = math_thread % 128;
                #pragma unroll
                for (uint32_t half = 0; half < 2; ++half) {
                    // The previous tile's TMA stores must be done reading the buffer.
                    if (kTMAStore and half == 0 and math_wg == 0 and math_thread % 128 == 0)
                        tma_store_wait<true>();
                    named_barrier_sync(kReduceBarrier, 256);       // buffer free
                    if (math_wg == 1) {
                        #pragma unroll
                        for (uint32_t i = 0; i < kHalf; ++i)
                            exchange[i * 128 + t] = final_accum[half * kHalf + i];
                    }
                    named_barrier_sync(kReduceBarrier, 256);       // partials written
                    if (math_wg == 0) {
                        #pragma unroll
                        for (uint32_t i = 0; i < kHalf; ++i)
                            final_accum[half * kHalf + i] += exchange[i * 128 + t];
                    }
                }
            }
            if (kSplitK and math_wg == 1)
                return;                     // warpgroup 0 writes the tile

            // Each warpgroup stages its 64 rows at wg_smem_d (1024-byte aligned: 64 pitches).
            const uint32_t barrier_id = 1 + math_wg;
            const bool store_leader = math_thread % 128 == 0;
            uint8_t* wg_smem_d = smem_d + wg_row0 * SMEM_D_PITCH;
            // The first column this CTA stores.
            const uint32_t epi_n_start = n_start + k_rank * EPI_N;

            if constexpr (kNumKSplit > 1) {
                // K-split pair: each CTA keeps half of the tile's columns (rank 0 the first)
                // and sends the other half of its partial sums to the peer, whose same
                // warpgroup adds them. The message lands in the peer's staging rows of this
                // warpgroup (free once the peer's previous epilogue has read them), in
                // fragment order: thread t's j-th 16 bytes at (j * 128 + t) * 16, so both
                // sides' accesses are conflict-free and thread t reads what thread t sent.
                // st.async counts its bytes on the peer's full barrier, whose store leader
                // expects them. NOTES (e2): remote stores, each thread then arriving with a
                // cluster-scope release, cost 0.6..0.7 us more per call at 128x4096x7168.
                constexpr uint32_t kHalf = kNumFinalAccum / 2;
                static_assert(kHalf % 4 == 0 and kHalf * 4 * 128 <= WGMMA_M * SMEM_D_PITCH,
                              "the message fits the warpgroup's staging rows");
                const uint32_t t = math_thread % 128;
                const uint32_t slot = smem_addr(wg_smem_d) + t * 16;
                exchange_free[math_wg].wait<true>(exchange_phase ^ 1);
                const uint32_t remote = map_to_cta(slot, peer);
                const uint32_t remote_full = map_to_cta(smem_addr(exchange_full + math_wg), peer);
                #pragma unroll
                for (uint32_t j = 0; j < kHalf / 4; ++j) {
                    // Selects, not a run-time index: the fragment must stay in registers.
                    float v[4];
                    #pragma unroll
                    for (uint32_t q = 0; q < 4; ++q)
                        v[q] = k_rank == 0 ? final_accum[kHalf + j * 4 + q] : final_accum[j * 4 + q];
                    st_async_v4(remote + j * 128 * 16, v[0], v[1], v[2], v[3], remote_full);
                }
                if (store_leader)
                    exchange_full[math_wg].arrive_expect_tx(kHalf * 4 * 128);
                // The kept half moves to the front: the epilogue stores final_accum[0, kHalf).
                #pragma unroll
                for (uint32_t i = 0; i < kHalf; ++i)
                    final_accum[i] = k_rank == 0 ? final_accum[i] : final_accum[kHalf + i];
                exchange_full[math_wg].wait<true>(exchange_phase);
                #pragma unroll
                for (uint32_t j = 0; j < kHalf / 4; ++j) {
                    const float4 v = ld_shared_v4(slot + j * 128 * 16);
                    final_accum[j * 4 + 0] += v.x, final_accum[j * 4 + 1] += v.y;
                    final_accum[j * 4 + 2] += v.z, final_accum[j * 4 + 3] += v.w;
                }
                exchange_phase ^= 1;
                // (The epilogue's barrier below orders these reads before its staging writes.)
            }
            // Once this warpgroup's staging rows are read (by TMA or by its threads), the
            // peer of a K-split pair may write its next message there.
            auto release_staging = [&]() {
                if constexpr (kNumKSplit > 1) {
                    if (store_leader) {
                        if constexpr (kTMAStore)
                            tma_store_wait<true>();
                        exchange_free[math_wg].arrive_cluster_release(peer);
                    }
                }
            };

            // ---- Epilogue ---------------------------------------------------------------
            if (kTMAStore and store_leader)
                tma_store_wait<true>();                   // last tile's stores read the buffer
            // TMA stores need all 64 rows to be real output rows (the plain GEMM's tensor
            // bounds clip the M tail).
            const bool whole = kTMAStore and
                (kGemmType == GemmType::Normal or (rows.x & rows.y) == 0xffffffffu);
            named_barrier_sync(barrier_id, 128);
            if (kTMAStore and whole) {
                // Registers -> 128B-swizzled 64-column chunks -> one TMA store per chunk. stmatrix
                // writes two 8-column groups of the warp's 16 rows at a time (four 8x8 matrices:
                // lane l gives the address of row l % 8 of matrix l / 8, i.e. group i + l / 16,
                // rows + 8 for odd matrices); a matrix's 8 rows land in 8 different 16-byte
                // units (conflict-free). EPI_N is a multiple of 64: whole pairs of groups.
                static_assert(not kTMAStore or EPI_N % 16 == 0,
                              "stmatrix x4 stages pairs of 8-column groups");
                constexpr uint32_t kGroups = kTMAStore ? kNumEpiAccum / 4 : 0;
                const uint32_t row = warp_in_wg * 16 + ((lane_idx / 8) % 2) * 8 + lane_idx % 8;
                #pragma unroll
                for (uint32_t mw = 0; mw < kNumMWaves; ++mw) {
                    // An M wave's 64 rows stage 128 rows further down (their own chunks).
                    const uint32_t base = smem_addr(wg_smem_d + mw * kMWaveRows * SMEM_D_PITCH) +
                                          row * 128;
                    const float* acc = final_accum + mw * kNumEpiAccum;
                    #pragma unroll
                    for (uint32_t i = 0; i < kGroups; i += 2) {
                        const uint32_t col_group = i + lane_idx / 16;
                        stmatrix_x4(base + (col_group / 8) * (WGMMA_M * 128) +
                                        (((col_group % 8) ^ (row % 8)) * 16),
                                    pack_bf16x2(acc[i * 4 + 0], acc[i * 4 + 1]),
                                    pack_bf16x2(acc[i * 4 + 2], acc[i * 4 + 3]),
                                    pack_bf16x2(acc[i * 4 + 4], acc[i * 4 + 5]),
                                    pack_bf16x2(acc[i * 4 + 6], acc[i * 4 + 7]));
                    }
                }
                fence_view_async_shared();                // generic writes -> TMA reads
                named_barrier_sync(barrier_id, 128);
                if (store_leader) {
                    const int32_t m_row = static_cast<int32_t>(
                        scheduler.global_row(m_block, group) + wg_row0);
                    // (A wave wholly past M is clipped by the tensor bounds: nothing written.)
                    #pragma unroll
                    for (uint32_t mw = 0; mw < kNumMWaves; ++mw) {
                        #pragma unroll
                        for (uint32_t c = 0; c < EPI_N / 64; ++c)
                            tma_store_2d(&tma_d, wg_smem_d + mw * kMWaveRows * SMEM_D_PITCH +
                                                     c * (WGMMA_M * 128),
                                         static_cast<int32_t>(epi_n_start + c * 64),
                                         m_row + static_cast<int32_t>(mw * kMWaveRows));
                    }
                    tma_store_commit();
                }
                release_staging();
                return;
            }
            // Registers -> padded smem -> coalesced global stores with per-row checks, 32 bits
            // at a time. NOTES: stmatrix here read 0.3..0.6% slower on all six padded-path rows
            // measured (bench/NOTES.md session 29, i3).
            {
                const uint32_t row = warp_in_wg * 16 + lane_idx / 4;
                const uint32_t col_bytes = (lane_idx % 4) * 4;
                #pragma unroll
                for (uint32_t mw = 0; mw < kNumMWaves; ++mw) {
                    const float* acc = final_accum + mw * kNumEpiAccum;
                    #pragma unroll
                    for (uint32_t i = 0; i < kNumEpiAccum / 4; ++i) {
                        uint8_t* p = wg_smem_d + (mw * kMWaveRows + row) * SMEM_D_PITCH +
                                     i * 16 + col_bytes;
                        *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(acc[i * 4 + 0], acc[i * 4 + 1]);
                        *reinterpret_cast<uint32_t*>(p + 8 * SMEM_D_PITCH) =
                            pack_bf16x2(acc[i * 4 + 2], acc[i * 4 + 3]);
                    }
                }
            }
            named_barrier_sync(barrier_id, 128);

            #pragma unroll
            for (uint32_t mw = 0; mw < kNumMWaves; ++mw) {
                const uint8_t* wave_smem_d = wg_smem_d + mw * kMWaveRows * SMEM_D_PITCH;
                const uint64_t d_row0 =
                    scheduler.global_row(m_block, group) + wg_row0 + mw * kMWaveRows;
                auto row_is_real = [&](uint32_t row) -> bool {       // row < 64 of this block
                    if constexpr (kGemmType == GemmType::Normal)
                        return d_row0 + row < shape_m;
                    return ((row < 32 ? rows.x : rows.y) >> (row % 32)) & 1u;
                };
                if constexpr (SHAPE_N % 8 == 0) {
                    // 16-byte vectors; N % 8 == 0 keeps every row start 16-byte aligned.
                    constexpr uint32_t kVecsPerRow = EPI_N / 8;
                    #pragma unroll 4
                    for (uint32_t v = math_thread % 128; v < WGMMA_M * kVecsPerRow; v += 128) {
                        const uint32_t row = v / kVecsPerRow, col = (v % kVecsPerRow) * 8;
                        if (epi_n_start + col >= SHAPE_N or not row_is_real(row))
                            continue;
                        const uint4 value =
                            *reinterpret_cast<const uint4*>(wave_smem_d + row * SMEM_D_PITCH + col * 2);
                        *reinterpret_cast<uint4*>(d + (d_row0 + row) * SHAPE_N + epi_n_start + col) =
                            value;
                    }
                } else {
                    #pragma unroll 4
                    for (uint32_t e = math_thread % 128; e < WGMMA_M * EPI_N; e += 128) {
                        const uint32_t row = e / EPI_N, col = e % EPI_N;
                        if (epi_n_start + col >= SHAPE_N or not row_is_real(row))
                            continue;
                        d[(d_row0 + row) * SHAPE_N + epi_n_start + col] =
                            *reinterpret_cast<const uint16_t*>(wave_smem_d + row * SMEM_D_PITCH + col * 2);
                    }
                }
            }
            if constexpr (kNumKSplit > 1) {
                named_barrier_sync(barrier_id, 128);   // every thread has read its rows
                release_staging();
            }
        };
        // The plain GEMM walks the scheduler itself (arithmetic only); the grouped layouts
        // take the tile the loader warp staged beside its B scales. NOTES: the two loops'
        // shapes are the ones with which the compiler keeps the K loop's stage addresses in
        // uniform registers (a `while (true)` loop cost the dense 128x256 tile 3.7%, the
        // `while (next)` loop kept them out of uniform registers on the grouped layouts;
        // bench/NOTES.md r1).
        if constexpr (kGemmType == GemmType::Normal) {
            while (scheduler.next(m_block, n_block, group)) {
                const uint32_t scales_slot = tile_count % 2;
                scales_b_full[scales_slot].wait((tile_count / 2) & 1);
                ++tile_count;
                compute_tile(scales_slot, uint2{0xffffffffu, 0xffffffffu});
            }
        } else {
            while (true) {
                const uint32_t scales_slot = tile_count % 2;
                scales_b_full[scales_slot].wait((tile_count / 2) & 1);
                const StagedTile* staged = staged_tiles + scales_slot;
                const uint4 head = *reinterpret_cast<const uint4*>(staged);
                if (__all_sync(0xffffffff, head.x == StagedTile::kNoTile))
                    break;
                const uint2 rows = *reinterpret_cast<const uint2*>(
                    staged->row_mask + wg_row0 / 32);
                // Shuffled from lane 0: values the compiler knows are warp-uniform.
                m_block = __shfl_sync(0xffffffff, head.x, 0);
                n_block = __shfl_sync(0xffffffff, head.y, 0);
                group = __shfl_sync(0xffffffff, head.z, 0);
                ++tile_count;
                compute_tile(scales_slot, uint2{__shfl_sync(0xffffffff, rows.x, 0),
                                                __shfl_sync(0xffffffff, rows.y, 0)});
            }
        }
    }

    // Shared memory must outlive the last TMA stores' reads of it.
    if constexpr (kTMAStore) {
        if (threadIdx.x >= 128 and (threadIdx.x - 128) % 128 == 0)
            tma_store_wait<false>();
    }

    // Neither CTA of a cluster may exit while its peer can still arrive on its barriers (or
    // write its shared memory).
    if constexpr (kNumTMAMulticast * kNumKSplit > 1) {
        __syncwarp();
        cluster_sync();
    }
#else
    // This kernel needs wgmma/setmaxnreg: it only has a body when compiled for sm_90a.
    asm volatile("trap;");
#endif
}

}  // namespace dgemm
