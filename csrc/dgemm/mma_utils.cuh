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

// stmatrix .x4: four 8x8 bf16 matrices from the WGMMA accumulator fragment to shared memory.
// Register j of lane l holds row l / 4, columns 2 * (l % 4) + {0, 1} of matrix j (as
// pack_bf16x2 makes it); lanes 8j..8j+7 give the addresses of matrix j's eight 16-byte rows.
// NOTES: against one 32-bit store per register pair, +1.7..2.6% on 192x128 tiles
// (bench/NOTES.md session 29, i2, i3).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

}  // namespace dgemm
