#pragma once
// WGMMA helpers: shared-memory matrix descriptors and the async-group protocol.
#include "sync_utils.cuh"
#include "wgmma_ops.cuh"

namespace dgemm {

// Descriptor of a K-major tile whose 128-byte rows were written by TMA with 128B swizzling:
// 8-row x 128-byte swizzle atoms, consecutive atoms 1024 bytes apart. The tile base must be
// 1024-byte aligned (the hardware swizzles on absolute address bits). Built from two 32-bit
// halves: the low word is the start address in 16-byte units (stages and K steps add small
// constants to it, never carrying into the high word), the high word is constant.
__device__ __forceinline__ uint32_t smem_desc_k128b_lo(const void* tile) {
    return (smem_addr(tile) & 0x3FFFF) >> 4;
}

__device__ __forceinline__ uint64_t smem_desc_k128b(uint32_t lo) {
    constexpr uint32_t kStrideBytes = 1024;             // bits 32..45: stride >> 4
    constexpr uint32_t kSwizzle128B = 1u << 30;         // bits 62..63: 1 = 128B swizzle
    uint64_t desc;
    asm("mov.b64 %0, {%1, %2};" : "=l"(desc) : "r"(lo), "n"((kStrideBytes >> 4) | kSwizzle128B));
    return desc;
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit_group() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(kPending) : "memory");
}

// Keep the compiler from moving accumulator reads/writes across the async WGMMA window.
__device__ __forceinline__ void fence_operand(float& reg) {
    asm volatile("" : "+f"(reg) :: "memory");
}

// Two floats -> packed bf16x2 (lo in the low half), round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t out;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
    return out;
}

}  // namespace dgemm
