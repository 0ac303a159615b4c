#pragma once
// Test stand-in for the sm_80+ portable kernel: same template parameters as
// dgemm::fp8_gemm_portable_kernel, a trivial body.
#include <dgemm/utils.cuh>

namespace dgemm {

template <GemmType kGemmType, uint32_t SHAPE_N, uint32_t SHAPE_K, uint32_t kNumGroups,
          uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
fp8_gemm_portable_kernel(float* out, uint32_t shape_m) {
    const uint32_t index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index < shape_m)
        out[index] = static_cast<float>(SHAPE_N * BLOCK_M + SHAPE_K * BLOCK_N);
}

}  // namespace dgemm
