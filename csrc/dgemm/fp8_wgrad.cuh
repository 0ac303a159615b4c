#pragma once
// FP8 weight-gradient GEMM for sm_90a (recipe (1, 1, 128)):
//   D[M, N] (fp32) = C[M, N] (fp32) + sum over K blocks kb of
//                    (A[M, kb] . B[N, kb]^T) * scale_a[m, kb] * scale_b[n, kb]
// A and B are e4m3, K-major, and BOTH carry one scale per row and 128-wide K block (K is the
// token dimension of a training step). Unlike the forward kernel (fp8_gemm.cuh), whose B scale
// is one number per 128x128 block and so per 128 output columns, here every output column has
// its own B scale: the promotion multiplies a per-row and a per-column factor.
//
// K is a run-time argument (tokens per step, and each group of the k-grouped GEMM has its
// own), so one kernel serves every K of a layer. `c` and `d` may be the same buffer: every
// element is read and then written by the same thread.
//
// Persistent and warp-specialised: warpgroup 0 is the TMA producer (A, B and both scale
// vectors per K block into a ring of kNumStages stages), two math warpgroups own 64 rows of
// the 128-row tile each. The epilogue adds C and stores fp32 directly from the registers.
//
// UNVERIFIED on a GPU (training t0, bench/NOTES.md): compiled and plan-checked on CPU only.
#include "mma_utils.cuh"
#include "tma_utils.cuh"

namespace dgemm {

// ---- The kernel's plan, shared with Python (dgemm/kernels/hopper_wgrad.py) -------------------
struct Fp8WgradSmem {
    uint32_t a, b, scales_a, scales_b, full_barriers, empty_barriers, total;
};

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages>
__host__ __device__ constexpr Fp8WgradSmem fp8_wgrad_smem() {
    const uint32_t a = 0;                                           // 1024-aligned tiles first
    const uint32_t b = a + kNumStages * BLOCK_M * BLOCK_K;
    const uint32_t scales_a = b + kNumStages * BLOCK_N * BLOCK_K;
    const uint32_t scales_b = scales_a + kNumStages * BLOCK_M * 4;
    const uint32_t full = scales_b + kNumStages * BLOCK_N * 4;
    const uint32_t empty = full + kNumStages * 8;
    return {a, b, scales_a, scales_b, full, empty, empty + kNumStages * 8};
}

enum : uint32_t {
    kWgradProducerThreads = 128,
    kWgradMathThreads = 256,        // two warpgroups of 64 rows: BLOCK_M is 128
};

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages,
          uint32_t kPlannedSmemBytes, uint32_t kPlannedThreads>
struct Fp8WgradPlanCheck {
    static_assert(fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>().total <= 232448,
                  "the wgrad kernel's shared memory exceeds the 232448 bytes an sm_90 CTA may "
                  "use: fewer stages or a narrower tile");
    static_assert(fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>().total ==
                  kPlannedSmemBytes, "dgemm/kernels/hopper_wgrad.py plans a different amount "
                  "of shared memory than the kernel carves (fp8_wgrad_smem)");
    static_assert(kWgradProducerThreads + kWgradMathThreads == kPlannedThreads,
                  "dgemm/kernels/hopper_wgrad.py launches a different thread count than the "
                  "kernel's three warpgroups");
};

// Run-time arguments:
//   c, d          fp32 [M, N], row-major (may be the same buffer)
//   shape_m       M; shape_k: K, a multiple of 128 (> 0: the host skips K == 0)
//   tma_a, tma_b  fp8 [M, K] / [N, K], 128B-swizzled boxes of (128 K) x (BLOCK_M / BLOCK_N rows)
//   tma_scales_a  fp32 MN-major [K / 128, align(M, 4)], boxes of BLOCK_M x 1
//   tma_scales_b  fp32 MN-major [K / 128, align(N, 4)], boxes of BLOCK_N x 1
// Grid: min(SMs, tiles) CTAs, each walking tiles blockIdx.x, + gridDim.x, ...
template <uint32_t SHAPE_N, uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K,
          uint32_t kNumStages, uint32_t kNumSMs>
__global__ void __launch_bounds__(kWgradProducerThreads + kWgradMathThreads, 1)
fp8_wgrad_kernel(const float* c, float* d, uint32_t shape_m, uint32_t shape_k,
                 const __grid_constant__ TmaDescriptor tma_a,
                 const __grid_constant__ TmaDescriptor tma_b,
                 const __grid_constant__ TmaDescriptor tma_scales_a,
                 const __grid_constant__ TmaDescriptor tma_scales_b) {
#if defined(__CUDA_ARCH__) and defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(BLOCK_K == 128, "one scale per 128-wide K block: BLOCK_K must be 128");
    static_assert(BLOCK_M == 128, "two math warpgroups of 64 rows");
    static_assert(BLOCK_N % 16 == 0 and BLOCK_N >= 16 and BLOCK_N <= 128,
                  "WGMMA N granularity; the accumulators of 128 columns fit the registers");
    static_assert(kNumStages >= 2, "a ring needs two stages");

    using WGMMA = WgmmaFp8<BLOCK_N>;
    constexpr uint32_t WGMMA_K = 32;
    constexpr uint32_t kNumAccum = WGMMA::kNumAccum;               // BLOCK_N / 2 per thread
    constexpr uint32_t SMEM_A_SIZE_PER_STAGE = BLOCK_M * BLOCK_K;
    constexpr uint32_t SMEM_B_SIZE_PER_STAGE = BLOCK_N * BLOCK_K;
    static_assert(SMEM_A_SIZE_PER_STAGE % 1024 == 0 and SMEM_B_SIZE_PER_STAGE % 1024 == 0,
                  "128B-swizzled tiles must stay 1024-byte aligned");
    constexpr uint32_t kStageBytes = SMEM_A_SIZE_PER_STAGE + SMEM_B_SIZE_PER_STAGE +
                                     BLOCK_M * 4 + BLOCK_N * 4;
    constexpr Fp8WgradSmem kSmem = fp8_wgrad_smem<BLOCK_M, BLOCK_N, BLOCK_K, kNumStages>();
    constexpr uint32_t kNumNBlocks = ceil_div(SHAPE_N, BLOCK_N);
    constexpr uint32_t kNumMathWarps = kWgradMathThreads / 32;
    constexpr uint32_t kNumTMARegisters = 40, kNumMathRegisters = 232;
    static_assert(128 * kNumTMARegisters + kWgradMathThreads * kNumMathRegisters <= 65536,
                  "register budgets (setmaxnreg) exceed the SM's 64K registers");

    extern __shared__ __align__(1024) uint8_t smem_buffer[];
    uint8_t* smem_a = smem_buffer + kSmem.a;
    uint8_t* smem_b = smem_buffer + kSmem.b;
    float* smem_scales_a = reinterpret_cast<float*>(smem_buffer + kSmem.scales_a);
    float* smem_scales_b = reinterpret_cast<float*>(smem_buffer + kSmem.scales_b);
    MBarrier* full_barriers = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.full_barriers);
    MBarrier* empty_barriers = reinterpret_cast<MBarrier*>(smem_buffer + kSmem.empty_barriers);

    const uint32_t warp_idx = __shfl_sync(0xffffffff, threadIdx.x / 32, 0);
    const uint32_t lane_idx = lane_index();
    const uint32_t num_k_blocks = shape_k / BLOCK_K;
    const uint32_t num_tiles = ceil_div(shape_m, BLOCK_M) * kNumNBlocks;

    if (threadIdx.x == 0) {
        tma_prefetch_descriptor(&tma_a);
        tma_prefetch_descriptor(&tma_b);
        tma_prefetch_descriptor(&tma_scales_a);
        tma_prefetch_descriptor(&tma_scales_b);
        for (uint32_t i = 0; i < kNumStages; ++i) {
            full_barriers[i].init(1);                  // the producer's expect_tx arrive
            empty_barriers[i].init(kNumMathWarps);     // one arrive per math warp
        }
        fence_view_async_shared();
        fence_barrier_init();
    }
    __syncthreads();

    // Tiles in n-major order within an m-block: consecutive CTAs share A rows (read from L2).
    // (The raster is a first choice, to be measured: bench/NOTES.md, training t0.)
    if (threadIdx.x < kWgradProducerThreads) {
        warpgroup_reg_dealloc<kNumTMARegisters>();
        if (warp_idx == 0 and elect_one_sync()) {
            uint32_t iteration = 0;            // K blocks issued so far, over every tile
            for (uint32_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
                const int32_t m0 = static_cast<int32_t>((tile / kNumNBlocks) * BLOCK_M);
                const int32_t n0 = static_cast<int32_t>((tile % kNumNBlocks) * BLOCK_N);
                #pragma unroll 1
                for (uint32_t k_block = 0; k_block < num_k_blocks; ++k_block, ++iteration) {
                    const uint32_t s = iteration % kNumStages;
                    const uint32_t phase = (iteration / kNumStages) & 1;
                    empty_barriers[s].wait(phase ^ 1);
                    MBarrier* full = full_barriers + s;
                    // Boxes past M or N are zero-filled and still count their whole size.
                    full->arrive_expect_tx(kStageBytes);
                    const int32_t k = static_cast<int32_t>(k_block * BLOCK_K);
                    tma_load_2d(&tma_a, full, smem_a + s * SMEM_A_SIZE_PER_STAGE, k, m0);
                    tma_load_2d(&tma_b, full, smem_b + s * SMEM_B_SIZE_PER_STAGE, k, n0);
                    tma_load_2d(&tma_scales_a, full, smem_scales_a + s * BLOCK_M, m0,
                                static_cast<int32_t>(k_block));
                    tma_load_2d(&tma_scales_b, full, smem_scales_b + s * BLOCK_N, n0,
                                static_cast<int32_t>(k_block));
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

        float accum[kNumAccum], final_accum[kNumAccum];
        uint32_t iteration = 0;
        for (uint32_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
            const uint32_t m0 = (tile / kNumNBlocks) * BLOCK_M;
            const uint32_t n0 = (tile % kNumNBlocks) * BLOCK_N;
            #pragma unroll
            for (uint32_t i = 0; i < kNumAccum; ++i)
                final_accum[i] = 0.0f;

            #pragma unroll 1
            for (uint32_t k_block = 0; k_block < num_k_blocks; ++k_block, ++iteration) {
                const uint32_t s = iteration % kNumStages;
                full_barriers[s].wait((iteration / kNumStages) & 1);
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum; ++i)
                    fence_operand(accum[i]);
                wgmma_fence();
                #pragma unroll
                for (uint32_t k = 0; k < BLOCK_K / WGMMA_K; ++k) {
                    const uint32_t step = k * (WGMMA_K >> 4);      // 32 bytes along K
                    WGMMA::mma(smem_desc_k128b(desc_a0 + s * (SMEM_A_SIZE_PER_STAGE >> 4) + step),
                               smem_desc_k128b(desc_b0 + s * (SMEM_B_SIZE_PER_STAGE >> 4) + step),
                               accum, k > 0);
                }
                wgmma_commit_group();
                // The scales of this K block, read while the WGMMAs run and before the stage
                // is handed back to the producer.
                const float* sa = smem_scales_a + s * BLOCK_M;
                const float* sb = smem_scales_b + s * BLOCK_N;
                const float a0 = sa[r0], a1 = sa[r0 + 8];
                float b_col[kNumAccum / 2];
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum / 4; ++i) {
                    const float2 pair =
                        *reinterpret_cast<const float2*>(sb + i * 8 + col_in_frag);
                    b_col[i * 2 + 0] = pair.x, b_col[i * 2 + 1] = pair.y;
                }
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum; ++i)
                    fence_operand(accum[i]);
                wgmma_wait_group<0>();
                __syncwarp();
                if (lane_idx == 0)
                    empty_barriers[s].arrive();

                // final += acc * scale_a(row) * scale_b(column): per row AND per column.
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum / 4; ++i) {
                    const float b0 = b_col[i * 2 + 0], b1 = b_col[i * 2 + 1];
                    final_accum[i * 4 + 0] += accum[i * 4 + 0] * (a0 * b0);
                    final_accum[i * 4 + 1] += accum[i * 4 + 1] * (a0 * b1);
                    final_accum[i * 4 + 2] += accum[i * 4 + 2] * (a1 * b0);
                    final_accum[i * 4 + 3] += accum[i * 4 + 3] * (a1 * b1);
                }
            }

            // Epilogue: d = c + final, fp32, straight from the registers (rows past M and
            // columns past N are never touched). Each element is read from c and written to d
            // by this thread only, so c may be d.
            #pragma unroll
            for (uint32_t h = 0; h < 2; ++h) {
                const uint32_t row = m0 + r0 + h * 8;
                if (row >= shape_m)
                    continue;
                const uint64_t base = static_cast<uint64_t>(row) * SHAPE_N;
                #pragma unroll
                for (uint32_t i = 0; i < kNumAccum / 4; ++i) {
                    const uint32_t col = n0 + i * 8 + col_in_frag;
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
    }
#else
    // This kernel needs wgmma/setmaxnreg: it only has a body when compiled for sm_90a.
    asm volatile("trap;");
#endif
}

}  // namespace dgemm
