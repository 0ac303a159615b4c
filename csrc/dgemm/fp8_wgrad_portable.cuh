#pragma once
// Portable FP8 weight-gradient GEMM for any sm_80+ GPU (recipe (1, 1, 128)):
//   D[M, N] (fp32) = C[M, N] + sum over 128-wide K blocks kb of
//                    (A[M, kb] . B[N, kb]^T) * scale_a[m, kb] * scale_b[n, kb]
// Both operands carry one scale per row and K block. The fallback on non-Hopper GPUs and the
// correctness oracle for the sm_90a wgrad kernel (fp8_wgrad.cuh): simple and correct first.
//
// Same machinery as fp8_gemm_portable.cuh: fp8 bytes global -> shared with cp.async (two
// stages), widened to bf16 in registers (exact), mma.sync m16n8k16 into fp32 per K block, then
// promoted with the row's A scale times the column's B scale. K is a run-time argument.
// `c` and `d` may be the same buffer (each element is read, then written, by one thread).
//
// UNVERIFIED on a GPU (training t0, bench/NOTES.md): compiled and plan-checked on CPU only.
#include "portable_utils.cuh"
#include "utils.cuh"

namespace dgemm {

enum : uint32_t {
    kWgradPortableStages = 2,
    kWgradPortableThreads = 128,     // 2 x 2 warps
};

__host__ __device__ constexpr uint32_t fp8_wgrad_portable_smem(uint32_t block_m, uint32_t block_n,
                                                               uint32_t block_k) {
    return kWgradPortableStages * (block_m + block_n) * block_k;
}

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kPlannedSmemBytes,
          uint32_t kPlannedThreads>
struct WgradPortablePlanCheck {
    static_assert(fp8_wgrad_portable_smem(BLOCK_M, BLOCK_N, BLOCK_K) == kPlannedSmemBytes,
                  "dgemm/kernels/portable_wgrad.py plans a different amount of shared memory "
                  "than the kernel uses (fp8_wgrad_portable_smem)");
    static_assert(kPlannedSmemBytes <= 166912,
                  "the portable wgrad kernel's shared memory exceeds an sm_80 CTA's 163 KiB");
    static_assert(kPlannedThreads == kWgradPortableThreads,
                  "dgemm/kernels/portable_wgrad.py launches a different thread count than the "
                  "kernel's 2 x 2 warps");
};

// Run-time arguments:
//   a, b            fp8 e4m3 [M, K] / [N, K], row-major (K-major)
//   scales_a        fp32 MN-major: (row, kb) at row + kb * align(M, 4)
//   scales_b        fp32 MN-major: (col, kb) at col + kb * align(N, 4)
//   c, d            fp32 [M, N] (may be the same buffer)
//   shape_m, shape_k  M and K (K a positive multiple of 128)
// Grid: (ceil(M / BLOCK_M), ceil(N / BLOCK_N)); block: kWgradPortableThreads.
template <uint32_t SHAPE_N, uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K,
          uint32_t kNumThreads>
__global__ void __launch_bounds__(kNumThreads)
fp8_wgrad_portable_kernel(const uint8_t* a, const float* scales_a, const uint8_t* b,
                          const float* scales_b, const float* c, float* d, uint32_t shape_m,
                          uint32_t shape_k) {
    using namespace dgemm::portable;
    static_assert(BLOCK_K == 128, "one fp32 scale per 128 K elements: BLOCK_K must be 128");
    static_assert(kNumThreads == kWgradPortableThreads, "the tile is split over 2 x 2 warps");
    static_assert(BLOCK_M % 32 == 0 && BLOCK_N % 16 == 0,
                  "a warp owns (BLOCK_M / 2) x (BLOCK_N / 2): 16-row by 8-column MMA tiles");

    constexpr uint32_t WARP_M = BLOCK_M / 2, WARP_N = BLOCK_N / 2;
    constexpr uint32_t kNumMmaM = WARP_M / 16, kNumMmaN = WARP_N / 8;
    constexpr uint32_t kChunksPerRow = BLOCK_K / 16;
    constexpr uint32_t SMEM_A_SIZE_PER_STAGE = BLOCK_M * BLOCK_K;
    constexpr uint32_t SMEM_B_SIZE_PER_STAGE = BLOCK_N * BLOCK_K;
    constexpr uint32_t kNumStages = kWgradPortableStages;
    constexpr uint32_t kScalesBStride = ceil_div(SHAPE_N, 4u) * 4;

    const uint32_t num_k_blocks = shape_k / BLOCK_K;
    const uint32_t thread_idx = threadIdx.x;
    const uint32_t warp_idx = thread_idx / 32, lane_idx = thread_idx % 32;
    const uint32_t warp_m_idx = warp_idx / 2, warp_n_idx = warp_idx % 2;
    const uint32_t row_in_quad = lane_idx / 4, col_in_quad = lane_idx % 4;
    const uint32_t m0 = blockIdx.x * BLOCK_M, n0 = blockIdx.y * BLOCK_N;
    const uint64_t scales_a_stride = ceil_div(shape_m, 4u) * 4;

    extern __shared__ __align__(128) uint8_t smem_buffer[];
    uint8_t* smem_a = smem_buffer;
    uint8_t* smem_b = smem_buffer + kNumStages * SMEM_A_SIZE_PER_STAGE;

    // Rows of A and B into the stage in the swizzled_chunk layout (portable_utils.cuh).
    const auto load_stage = [&](uint32_t k_block, uint32_t stage) {
        const uint32_t smem_a_stage = smem_address(smem_a + stage * SMEM_A_SIZE_PER_STAGE);
        const uint32_t smem_b_stage = smem_address(smem_b + stage * SMEM_B_SIZE_PER_STAGE);
        for (uint32_t i = thread_idx; i < BLOCK_M * kChunksPerRow; i += kNumThreads) {
            const uint32_t r = i / kChunksPerRow, ch = i % kChunksPerRow;
            const bool valid = m0 + r < shape_m;
            const uint64_t row = valid ? m0 + r : 0;
            cp_async_16(smem_a_stage + r * BLOCK_K + swizzled_chunk(r, ch) * 16,
                        a + row * shape_k + k_block * BLOCK_K + ch * 16, valid);
        }
        for (uint32_t i = thread_idx; i < BLOCK_N * kChunksPerRow; i += kNumThreads) {
            const uint32_t r = i / kChunksPerRow, ch = i % kChunksPerRow;
            const bool valid = n0 + r < SHAPE_N;
            const uint64_t row = valid ? n0 + r : 0;
            cp_async_16(smem_b_stage + r * BLOCK_K + swizzled_chunk(r, ch) * 16,
                        b + row * shape_k + k_block * BLOCK_K + ch * 16, valid);
        }
        cp_async_commit();
    };

    // m16n8k16 accumulator layout: c0, c1 at (row_in_quad, 2 * col_in_quad + {0, 1}), c2, c3
    // eight rows below.
    uint32_t tile_rows[kNumMmaM][2];
    #pragma unroll
    for (uint32_t i = 0; i < kNumMmaM; ++i) {
        tile_rows[i][0] = warp_m_idx * WARP_M + i * 16 + row_in_quad;
        tile_rows[i][1] = tile_rows[i][0] + 8;
    }
    uint32_t tile_cols[kNumMmaN][2];        // global columns, clamped into [0, N) for scales
    #pragma unroll
    for (uint32_t j = 0; j < kNumMmaN; ++j)
        #pragma unroll
        for (uint32_t h = 0; h < 2; ++h) {
            const uint32_t col = n0 + warp_n_idx * WARP_N + j * 8 + col_in_quad * 2 + h;
            tile_cols[j][h] = col < SHAPE_N ? col : SHAPE_N - 1;   // never stored past N
        }

    float result[kNumMmaM][kNumMmaN][4];
    #pragma unroll
    for (uint32_t i = 0; i < kNumMmaM; ++i)
        #pragma unroll
        for (uint32_t j = 0; j < kNumMmaN; ++j)
            #pragma unroll
            for (uint32_t e = 0; e < 4; ++e)
                result[i][j][e] = 0.0f;

    load_stage(0, 0);
    #pragma unroll 1
    for (uint32_t k_block = 0; k_block < num_k_blocks; ++k_block) {
        const uint32_t stage = k_block % kNumStages;
        if (k_block + 1 < num_k_blocks) {
            load_stage(k_block + 1, (k_block + 1) % kNumStages);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }

        float scale_a[kNumMmaM][2], scale_b[kNumMmaN][2];
        #pragma unroll
        for (uint32_t i = 0; i < kNumMmaM; ++i)
            #pragma unroll
            for (uint32_t h = 0; h < 2; ++h) {
                const uint32_t row = m0 + tile_rows[i][h];
                scale_a[i][h] = row < shape_m ? scales_a[row + k_block * scales_a_stride] : 0.0f;
            }
        #pragma unroll
        for (uint32_t j = 0; j < kNumMmaN; ++j)
            #pragma unroll
            for (uint32_t h = 0; h < 2; ++h)
                scale_b[j][h] = scales_b[tile_cols[j][h] +
                                         static_cast<uint64_t>(k_block) * kScalesBStride];
        __syncthreads();

        const uint32_t smem_a_stage = smem_address(smem_a + stage * SMEM_A_SIZE_PER_STAGE);
        const uint32_t smem_b_stage = smem_address(smem_b + stage * SMEM_B_SIZE_PER_STAGE);
        float accum[kNumMmaM][kNumMmaN][4];
        mma_k_block<BLOCK_K>(accum, smem_a_stage, smem_b_stage, tile_rows, warp_n_idx * WARP_N,
                             row_in_quad, col_in_quad);

        // Promote: the row's A scale times the column's B scale (both per K block).
        #pragma unroll
        for (uint32_t i = 0; i < kNumMmaM; ++i)
            #pragma unroll
            for (uint32_t j = 0; j < kNumMmaN; ++j) {
                result[i][j][0] += accum[i][j][0] * (scale_a[i][0] * scale_b[j][0]);
                result[i][j][1] += accum[i][j][1] * (scale_a[i][0] * scale_b[j][1]);
                result[i][j][2] += accum[i][j][2] * (scale_a[i][1] * scale_b[j][0]);
                result[i][j][3] += accum[i][j][3] * (scale_a[i][1] * scale_b[j][1]);
            }
        __syncthreads();          // the next iteration's copy overwrites the stage just read
    }

    // Epilogue: d = c + result in fp32, only real rows and columns.
    #pragma unroll
    for (uint32_t i = 0; i < kNumMmaM; ++i)
        #pragma unroll
        for (uint32_t h = 0; h < 2; ++h) {
            const uint32_t row = m0 + tile_rows[i][h];
            if (row >= shape_m)
                continue;
            const uint64_t base = static_cast<uint64_t>(row) * SHAPE_N;
            #pragma unroll
            for (uint32_t j = 0; j < kNumMmaN; ++j) {
                const uint32_t col = n0 + warp_n_idx * WARP_N + j * 8 + col_in_quad * 2;
                if (col < SHAPE_N)
                    d[base + col] = c[base + col] + result[i][j][h * 2];
                if (col + 1 < SHAPE_N)
                    d[base + col + 1] = c[base + col + 1] + result[i][j][h * 2 + 1];
            }
        }
}

}  // namespace dgemm
