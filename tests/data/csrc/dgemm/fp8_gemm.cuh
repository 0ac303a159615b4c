#pragma once
// Test stand-in for the sm_90a kernel: same template parameters as dgemm::fp8_gemm_kernel, a
// trivial body, so CPU tests exercise the whole JIT path in a fraction of a second per compile.
#include <dgemm/utils.cuh>

namespace dgemm {

template <GemmType kGemmType, uint32_t SHAPE_N, uint32_t SHAPE_K, uint32_t kNumGroups,
          uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumStages,
          uint32_t kNumTMAMulticast, bool kIsTMAMulticastOnA, uint32_t kNumSMs,
          uint32_t kNumMathThreads>
__global__ void __launch_bounds__(128 + kNumMathThreads, 1)
fp8_gemm_kernel(float* out, uint32_t shape_m) {
    const uint32_t index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index < shape_m)
        out[index] = static_cast<float>(SHAPE_N * BLOCK_M + SHAPE_K * BLOCK_N + kNumStages);
}

}  // namespace dgemm
