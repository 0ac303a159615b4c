#pragma once
// Test stand-in for the sm_80+ portable kernel: the same template and run-time parameters as
// dgemm::fp8_gemm_portable_kernel (tests/test_jit_stand_ins.py checks them), a trivial body.
#include <dgemm/utils.cuh>

namespace dgemm {

// The real header checks Python's plan here; the stand-in accepts any plan.
template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kPlannedSmemBytes,
          uint32_t kPlannedThreads>
struct PortablePlanCheck {};

template <GemmType kGemmType, uint32_t SHAPE_N, uint32_t SHAPE_K, uint32_t kNumGroups,
          uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t BLOCK_K, uint32_t kNumThreads>
__global__ void __launch_bounds__(kNumThreads)
fp8_gemm_portable_kernel(const uint8_t* a, const float* scales_a, const uint8_t* b,
                         const float* scales_b, uint16_t* d, const int32_t* grouped_layout,
                         uint32_t shape_m) {
    const uint32_t index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index < shape_m)
        d[index] = static_cast<uint16_t>(SHAPE_N * BLOCK_M + SHAPE_K * BLOCK_N);
}

}  // namespace dgemm
