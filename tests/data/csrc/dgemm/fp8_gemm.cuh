#pragma once
// Test stand-in for the sm_90a kernel: the same template and run-time parameters as
// dgemm::fp8_gemm_kernel (tests/test_jit_stand_ins.py checks the two compile to the same
// signature), a trivial body, so CPU tests exercise the whole JIT path in a fraction of a
// second per compile.
#include <dgemm/tma_utils.cuh>
#include <dgemm/utils.cuh>

namespace dgemm {

// The real header checks Python's plan here; the stand-in accepts any plan.
template <uint32_t SHAPE_N, uint32_t SHAPE_K, uint32_t BLOCK_M, uint32_t BLOCK_N,
          uint32_t BLOCK_K, uint32_t kNumStages, uint32_t kPlannedSmemBytes,
          uint32_t kPlannedThreads, bool kPlannedTMAStore, uint32_t kNumKSplit>
struct Fp8GemmPlanCheck {};

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
    const uint32_t index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index < shape_m)
        d[index] = static_cast<uint16_t>(SHAPE_N * BLOCK_M + SHAPE_K * BLOCK_N + kNumStages);
}

}  // namespace dgemm
