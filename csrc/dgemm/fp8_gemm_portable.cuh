#pragma once
// Portable FP8 block-scaled GEMM for any sm_80+ GPU: D[M, N] = A[M, K] * B[N, K]^T in bf16,
// with A scaled per (row, 128-wide K block) and B per (128x128 block). The fallback on
// non-Hopper GPUs and the test oracle for the sm_90a kernel: simple and correct first.
//
// FP8 bytes go global -> shared with cp.async (two stages), are widened to bf16 in registers
// (exact), multiplied with mma.sync m16n8k16 into fp32 per 128-wide K block, then promoted into
// the fp32 result with scale_a[row, kb] * scale_b[n / 128, kb].
#include "portable_utils.cuh"
#include "utils.cuh"

namespace dgemm {

// ---- The kernel's plan, shared with Python -----------------------------------------------------
// Dynamic shared memory: two cp.async stages of the fp8 A and B tiles. dgemm/kernels/
// portable_fp8.py reserves it from its own copy; the generated translation unit instantiates
// `PortablePlanCheck` with Python's numbers so that the two cannot drift apart.
// (Enumerators, not constexpr variables: NVRTC's -default-device would emit those as globals.)
enum : uint32_t {
    kPortableStages = 2,
    kPortableThreads = 128,      // the tile is split over 2 x 2 warps
};

__host__ __device__ constexpr uint32_t fp8_gemm_portable_smem(uint32_t block_m, uint32_t block_n,
                                                              uint32_t block_k) {
    return kPortableStages * (block_m + block_n) * block_k;
}

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kPlannedSmemBytes,
          uint32_t kPlannedThreads>
struct PortablePlanCheck {
    static_assert(fp8_gemm_portable_smem(BLOCK_M, BLOCK_N, BLOCK_K) == kPlannedSmemBytes,
                  "dgemm/kernels/portable_fp8.py plans a different amount of shared memory "
                  "than the kernel uses (fp8_gemm_portable_smem)");
    // sm_80's opt-in limit, the smallest of the GPUs this kernel serves (the row-group table
    // is static shared memory on top).
    static_assert(kPlannedSmemBytes + BLOCK_M * 4 <= 166912,
                  "the portable kernel's shared memory exceeds an sm_80 CTA's 163 KiB");
    static_assert(kPlannedThreads == kPortableThreads,
                  "dgemm/kernels/portable_fp8.py launches a different thread count than the "
                  "kernel's 2 x 2 warps");
};

// Run-time arguments (everything else is a template parameter):
//   a               fp8 e4m3 [M, K] (normal, contiguous) or [G, max_m, K] (masked), row-major
//   scales_a        fp32, MN-major: element (row, kb) at row + kb * align(M, 4), per group for
//                   masked ([G] x (K / 128) x align(max_m, 4))
//   b               fp8 [N, K] or [G, N, K]
//   scales_b        fp32 [ceil(N / 128), K / 128] or [G, ceil(N / 128), K / 128]
//   d               bf16 bits [M, N] or [G, max_m, N]
//   grouped_layout  contiguous: m_indices [M] (group of each row, -1 = padding);
//                   masked: masked_m [G]; normal: unused (may be null)
//   shape_m         M (normal, contiguous) or max_m (masked)
// Grid: (ceil(shape_m / BLOCK_M), ceil(N / BLOCK_N), masked ? G : 1); block: kNumThreads.
template <GemmType kGemmType, uint32_t SHAPE_N, uint32_t SHAPE_K, uint32_t kNumGroups,
          uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumThreads>
__global__ void __launch_bounds__(kNumThreads)
fp8_gemm_portable_kernel(const uint8_t* a, const float* scales_a, const uint8_t* b,
                         const float* scales_b, uint16_t* d, const int32_t* grouped_layout,
                         uint32_t shape_m) {
    using namespace dgemm::portable;

    // --- checks --------------------------------------------------------------------------
    static_assert(BLOCK_K == 128, "one fp32 scale per 128 K elements: BLOCK_K must be 128");
    static_assert(SHAPE_K % BLOCK_K == 0, "K must be a multiple of 128");
    static_assert(kNumThreads == kPortableThreads, "the tile is split over 2 x 2 warps");
    static_assert(BLOCK_M % 32 == 0 && BLOCK_N % 16 == 0,
                  "a warp owns (BLOCK_M / 2) x (BLOCK_N / 2): 16-row by 8-column MMA tiles");
    static_assert(kGemmType == GemmType::Normal ? kNumGroups == 1 : kNumGroups >= 1,
                  "a normal GEMM has exactly one group");

    // --- configs ---------------------------------------------------------------------------
    constexpr uint32_t kNumKBlocks = SHAPE_K / BLOCK_K;
    constexpr uint32_t kNumNScaleBlocks = ceil_div(SHAPE_N, 128u);
    constexpr uint32_t WARP_M = BLOCK_M / 2, WARP_N = BLOCK_N / 2;
    constexpr uint32_t kNumMmaM = WARP_M / 16, kNumMmaN = WARP_N / 8;
    constexpr uint32_t kChunksPerRow = BLOCK_K / 16;      // 16-byte cp.async chunks
    constexpr uint32_t SMEM_A_SIZE_PER_STAGE = BLOCK_M * BLOCK_K;
    constexpr uint32_t SMEM_B_SIZE_PER_STAGE = BLOCK_N * BLOCK_K;
    constexpr uint32_t kNumStages = kPortableStages;

    const uint32_t thread_idx = threadIdx.x;
    const uint32_t warp_idx = thread_idx / 32, lane_idx = thread_idx % 32;
    const uint32_t warp_m_idx = warp_idx / 2, warp_n_idx = warp_idx % 2;
    const uint32_t row_in_quad = lane_idx / 4, col_in_quad = lane_idx % 4;
    const uint32_t m_block_idx = blockIdx.x, n_block_idx = blockIdx.y;
    const uint32_t scales_a_stride = ceil_div(shape_m, 4u) * 4;   // TMA-aligned MN-major

    // --- shared memory carving ---------------------------------------------------------------
    extern __shared__ __align__(128) uint8_t smem_buffer[];
    uint8_t* smem_a = smem_buffer;
    uint8_t* smem_b = smem_buffer + kNumStages * SMEM_A_SIZE_PER_STAGE;
    __shared__ int32_t smem_row_group[BLOCK_M];    // contiguous layout: group of each tile row

    // --- which rows are valid, and where this tile's group lives ------------------------------
    uint32_t num_valid_rows = shape_m;     // normal and masked: rows [0, num_valid_rows) are real
    int32_t group_idx = 0;
    if constexpr (kGemmType == GemmType::GroupedMasked) {
        group_idx = static_cast<int32_t>(blockIdx.z);
        const int32_t masked_m = grouped_layout[group_idx];
        // NOTES: masked_m lives on the device and is never checked on the host; clamp it.
        num_valid_rows = masked_m < 0 ? 0u : static_cast<uint32_t>(masked_m);
        num_valid_rows = num_valid_rows < shape_m ? num_valid_rows : shape_m;
        if (m_block_idx * BLOCK_M >= num_valid_rows)
            return;
    } else if constexpr (kGemmType == GemmType::GroupedContiguous) {
        // Groups are padded to 128 rows, so a tile holds one group plus -1 padding rows; the
        // tile's group is the largest index among its rows (-1: the whole tile is padding).
        int32_t tile_max = -1;
        for (uint32_t r = thread_idx; r < BLOCK_M; r += kNumThreads) {
            const uint32_t row = m_block_idx * BLOCK_M + r;
            const int32_t group = row < shape_m ? grouped_layout[row] : -1;
            smem_row_group[r] = group;
            tile_max = group > tile_max ? group : tile_max;
        }
        __shared__ int32_t smem_warp_max[kNumThreads / 32];
        tile_max = warp_max(tile_max);
        if (lane_idx == 0)
            smem_warp_max[warp_idx] = tile_max;
        __syncthreads();
        group_idx = smem_warp_max[0];
        for (uint32_t w = 1; w < kNumThreads / 32; ++w)
            group_idx = smem_warp_max[w] > group_idx ? smem_warp_max[w] : group_idx;
        // An out-of-range index is a caller bug; never read another group's memory for it.
        if (group_idx < 0 || group_idx >= static_cast<int32_t>(kNumGroups))
            return;
    }
    const auto is_row_valid = [&](uint32_t r) -> bool {
        if constexpr (kGemmType == GemmType::GroupedContiguous)
            return smem_row_group[r] == group_idx;
        else
            return m_block_idx * BLOCK_M + r < num_valid_rows;
    };

    // Per-group bases: masked groups own A, scales_a and D slices; grouped layouts own B slices.
    const uint64_t group = static_cast<uint64_t>(group_idx);
    if constexpr (kGemmType == GemmType::GroupedMasked) {
        a += group * shape_m * SHAPE_K;
        scales_a += group * scales_a_stride * kNumKBlocks;
        d += group * shape_m * SHAPE_N;
    }
    b += group * SHAPE_N * SHAPE_K;
    scales_b += group * kNumNScaleBlocks * kNumKBlocks;

    // --- global -> shared copies -----------------------------------------------------------
    // Rows of A and B into the stage in the swizzled_chunk layout (portable_utils.cuh).
    const auto load_stage = [&](uint32_t k_block_idx, uint32_t stage) {
        const uint32_t smem_a_stage = smem_address(smem_a + stage * SMEM_A_SIZE_PER_STAGE);
        const uint32_t smem_b_stage = smem_address(smem_b + stage * SMEM_B_SIZE_PER_STAGE);
        #pragma unroll
        for (uint32_t i = thread_idx; i < BLOCK_M * kChunksPerRow; i += kNumThreads) {
            const uint32_t r = i / kChunksPerRow, c = i % kChunksPerRow;
            const bool valid = is_row_valid(r);
            const uint64_t row = valid ? m_block_idx * BLOCK_M + r : 0;
            cp_async_16(smem_a_stage + r * BLOCK_K + swizzled_chunk(r, c) * 16,
                        a + row * SHAPE_K + k_block_idx * BLOCK_K + c * 16, valid);
        }
        #pragma unroll
        for (uint32_t i = thread_idx; i < BLOCK_N * kChunksPerRow; i += kNumThreads) {
            const uint32_t r = i / kChunksPerRow, c = i % kChunksPerRow;
            const bool valid = n_block_idx * BLOCK_N + r < SHAPE_N;
            const uint64_t row = valid ? n_block_idx * BLOCK_N + r : 0;
            cp_async_16(smem_b_stage + r * BLOCK_K + swizzled_chunk(r, c) * 16,
                        b + row * SHAPE_K + k_block_idx * BLOCK_K + c * 16, valid);
        }
        cp_async_commit();
    };

    // --- this thread's rows and columns ------------------------------------------------------
    // m16n8k16 accumulator layout: c0, c1 at (row_in_quad, 2 * col_in_quad + {0, 1}), c2, c3
    // eight rows below.
    uint32_t tile_rows[kNumMmaM][2];
    #pragma unroll
    for (uint32_t i = 0; i < kNumMmaM; ++i) {
        tile_rows[i][0] = warp_m_idx * WARP_M + i * 16 + row_in_quad;
        tile_rows[i][1] = tile_rows[i][0] + 8;
    }
    uint32_t n_scale_offsets[kNumMmaN];     // scales_b row of each 8-column MMA tile
    #pragma unroll
    for (uint32_t j = 0; j < kNumMmaN; ++j) {
        uint32_t n = n_block_idx * BLOCK_N + warp_n_idx * WARP_N + j * 8;
        n = n < SHAPE_N ? n : SHAPE_N - 1;     // columns past N are computed but never stored
        n_scale_offsets[j] = (n / 128) * kNumKBlocks;
    }

    float result[kNumMmaM][kNumMmaN][4];
    #pragma unroll
    for (uint32_t i = 0; i < kNumMmaM; ++i)
        #pragma unroll
        for (uint32_t j = 0; j < kNumMmaN; ++j)
            #pragma unroll
            for (uint32_t e = 0; e < 4; ++e)
                result[i][j][e] = 0.0f;

    // --- main loop: one 128-wide K block per iteration ----------------------------------------
    load_stage(0, 0);
    #pragma unroll 1
    for (uint32_t k_block_idx = 0; k_block_idx < kNumKBlocks; ++k_block_idx) {
        const uint32_t stage = k_block_idx % kNumStages;
        if (k_block_idx + 1 < kNumKBlocks) {
            load_stage(k_block_idx + 1, (k_block_idx + 1) % kNumStages);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }

        // Scales first, so their global latency overlaps the MMAs.
        float scale_a[kNumMmaM][2], scale_b[kNumMmaN];
        #pragma unroll
        for (uint32_t i = 0; i < kNumMmaM; ++i)
            #pragma unroll
            for (uint32_t h = 0; h < 2; ++h) {
                const uint32_t row = m_block_idx * BLOCK_M + tile_rows[i][h];
                scale_a[i][h] = row < shape_m
                    ? scales_a[row + static_cast<uint64_t>(k_block_idx) * scales_a_stride] : 0.0f;
            }
        #pragma unroll
        for (uint32_t j = 0; j < kNumMmaN; ++j)
            scale_b[j] = scales_b[n_scale_offsets[j] + k_block_idx];
        __syncthreads();

        const uint32_t smem_a_stage = smem_address(smem_a + stage * SMEM_A_SIZE_PER_STAGE);
        const uint32_t smem_b_stage = smem_address(smem_b + stage * SMEM_B_SIZE_PER_STAGE);
        float accum[kNumMmaM][kNumMmaN][4];
        mma_k_block<BLOCK_K>(accum, smem_a_stage, smem_b_stage, tile_rows, warp_n_idx * WARP_N,
                             row_in_quad, col_in_quad);

        // Promote this K block into the fp32 result with its scales.
        #pragma unroll
        for (uint32_t i = 0; i < kNumMmaM; ++i)
            #pragma unroll
            for (uint32_t j = 0; j < kNumMmaN; ++j) {
                const float scale_0 = scale_a[i][0] * scale_b[j];
                const float scale_1 = scale_a[i][1] * scale_b[j];
                result[i][j][0] += accum[i][j][0] * scale_0;
                result[i][j][1] += accum[i][j][1] * scale_0;
                result[i][j][2] += accum[i][j][2] * scale_1;
                result[i][j][3] += accum[i][j][3] * scale_1;
            }
        // The next iteration's copy overwrites the stage just read.
        __syncthreads();
    }

    // --- epilogue: bf16 out, only valid rows and columns -----------------------------------
    #pragma unroll
    for (uint32_t i = 0; i < kNumMmaM; ++i)
        #pragma unroll
        for (uint32_t h = 0; h < 2; ++h) {
            const uint32_t r = tile_rows[i][h];
            if (!is_row_valid(r))
                continue;
            uint16_t* d_row = d + static_cast<uint64_t>(m_block_idx * BLOCK_M + r) * SHAPE_N;
            #pragma unroll
            for (uint32_t j = 0; j < kNumMmaN; ++j) {
                const uint32_t col = n_block_idx * BLOCK_N + warp_n_idx * WARP_N + j * 8 +
                                     col_in_quad * 2;
                const float lo = result[i][j][h * 2], hi = result[i][j][h * 2 + 1];
                if constexpr (SHAPE_N % 2 == 0) {
                    // Even N: col is even and col + 1 < N whenever col < N; 4-byte aligned.
                    if (col < SHAPE_N)
                        *reinterpret_cast<uint32_t*>(d_row + col) = pack_bf16x2(lo, hi);
                } else {
                    if (col < SHAPE_N)
                        d_row[col] = to_bf16(lo);
                    if (col + 1 < SHAPE_N)
                        d_row[col + 1] = to_bf16(hi);
                }
            }
        }
}

}  // namespace dgemm
