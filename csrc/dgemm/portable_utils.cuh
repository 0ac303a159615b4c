#pragma once
// PTX wrappers for the portable (sm_80+) kernel. No system headers: NVRTC compiles this without
// a CUDA include path, so everything below is inline PTX or plain integer arithmetic.

#include "utils.cuh"

namespace dgemm::portable {

struct alignas(16) Bytes16 { uint32_t w[4]; };

// Generic -> shared-window address, as cp.async and ld.shared want it.
__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
    uint32_t address;
    asm volatile("{ .reg .u64 u; cvta.to.shared.u64 u, %1; cvt.u32.u64 %0, u; }"
                 : "=r"(address) : "l"(ptr));
    return address;
}

// Copies 16 bytes global -> shared; with `valid == false` it reads nothing and writes zeros.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
    const uint32_t src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int kNumPending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(kNumPending) : "memory");
}

__device__ __forceinline__ Bytes16 ld_shared_16(uint32_t address) {
    Bytes16 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "r"(address));
    return v;
}

__device__ __forceinline__ int32_t warp_max(int32_t value) {
    int32_t result;
    asm volatile("redux.sync.max.s32 %0, %1, 0xffffffff;" : "=r"(result) : "r"(value));
    return result;
}

// IEEE fp32 multiply that keeps subnormals whatever -ftz/--use_fast_math the JIT passes.
__device__ __forceinline__ uint32_t mul_f32_bits(uint32_t a_bits, float b) {
    uint32_t result;
    asm("mul.rn.f32 %0, %1, %2;" : "=r"(result) : "r"(a_bits), "f"(b));
    return result;
}

// Two e4m3 bytes (bits [7:0] and [15:8] of `x`) -> one bf16x2 register, exactly.
// NOTES: placing the 7 magnitude bits at fp32 bit 20 makes an fp32 whose exponent field is the
// e4m3 exponent (subnormal e4m3 lands on subnormal fp32 with the same scaling); multiplying by
// 2^120 rebiases 7 -> 127. Every e4m3 value fits bf16's 7 mantissa bits, so dropping the low
// half is exact. The e4m3 NaN pattern (0x7f) becomes 480, never produced by quantisation.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t x) {
    constexpr float kRebias = 1.329227995784916e36f;   // 2^120
    const uint32_t lo = ((x & 0x7fu) << 20) | ((x & 0x80u) << 24);
    const uint32_t hi = ((x & 0x7f00u) << 12) | ((x & 0x8000u) << 16);
    const uint32_t lo_f32 = mul_f32_bits(lo, kRebias);
    const uint32_t hi_f32 = mul_f32_bits(hi, kRebias);
    uint32_t packed;
    asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(packed) : "r"(lo_f32), "r"(hi_f32));
    return packed;
}

// Round two fp32 values to a bf16x2 (`lo` in the low half).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
}

__device__ __forceinline__ uint16_t to_bf16(float value) {
    return static_cast<uint16_t>(pack_bf16x2(value, 0.0f) & 0xffffu);
}

// D += A * B for one m16n8k16 tile: bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&acc)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The stage layout of the portable kernels: chunk c (16 bytes) of row r of a 128-byte K block
// sits at chunk c ^ ((r & 1) * 4). NOTES: the fragment reads of `mma_k_block` (8 lanes = 2 rows
// x 4 chunks per phase) then hit all 32 banks once.
__device__ __forceinline__ uint32_t swizzled_chunk(uint32_t r, uint32_t c) {
    return c ^ ((r & 1u) << 2);
}

// One 128-byte K block of a shared-memory stage (fp8 rows of BLOCK_K bytes in the
// swizzled_chunk layout) into `accum` (zeroed first) as bf16 m16n8k16 MMAs: A rows
// `tile_rows`, B rows `b_row0 + 8 j + row_in_quad`.
// NOTES: the order of K inside a block does not change the dot product as long as A and B
// agree, so lane (., q) reads 16 contiguous bytes (chunk 4 * half + q) of each of its rows and
// feeds byte pairs (4s, 4s+1) and (4s+2, 4s+3) of word s to the fragment slots for k = 2q +
// {0, 1} and k = 2q + 8 + {0, 1} of MMA step s, in A and B alike.
template <uint32_t BLOCK_K, uint32_t kNumMmaM, uint32_t kNumMmaN>
__device__ __forceinline__ void mma_k_block(float (&accum)[kNumMmaM][kNumMmaN][4],
                                            uint32_t smem_a_stage, uint32_t smem_b_stage,
                                            const uint32_t (&tile_rows)[kNumMmaM][2],
                                            uint32_t b_row0, uint32_t row_in_quad,
                                            uint32_t col_in_quad) {
    #pragma unroll
    for (uint32_t i = 0; i < kNumMmaM; ++i)
        #pragma unroll
        for (uint32_t j = 0; j < kNumMmaN; ++j)
            #pragma unroll
            for (uint32_t e = 0; e < 4; ++e)
                accum[i][j][e] = 0.0f;
    #pragma unroll 1
    for (uint32_t half = 0; half < 2; ++half) {
        const uint32_t chunk = half * 4 + col_in_quad;
        Bytes16 a_bytes[kNumMmaM][2], b_bytes[kNumMmaN];
        #pragma unroll
        for (uint32_t i = 0; i < kNumMmaM; ++i)
            #pragma unroll
            for (uint32_t h = 0; h < 2; ++h) {
                const uint32_t r = tile_rows[i][h];
                a_bytes[i][h] = ld_shared_16(smem_a_stage + r * BLOCK_K +
                                             swizzled_chunk(r, chunk) * 16);
            }
        #pragma unroll
        for (uint32_t j = 0; j < kNumMmaN; ++j) {
            const uint32_t r = b_row0 + j * 8 + row_in_quad;
            b_bytes[j] = ld_shared_16(smem_b_stage + r * BLOCK_K + swizzled_chunk(r, chunk) * 16);
        }
        #pragma unroll
        for (uint32_t s = 0; s < 4; ++s) {
            uint32_t b_frag[kNumMmaN][2];
            #pragma unroll
            for (uint32_t j = 0; j < kNumMmaN; ++j) {
                b_frag[j][0] = e4m3x2_to_bf16x2(b_bytes[j].w[s]);
                b_frag[j][1] = e4m3x2_to_bf16x2(b_bytes[j].w[s] >> 16);
            }
            #pragma unroll
            for (uint32_t i = 0; i < kNumMmaM; ++i) {
                const uint32_t a_frag[4] = {
                    e4m3x2_to_bf16x2(a_bytes[i][0].w[s]),
                    e4m3x2_to_bf16x2(a_bytes[i][1].w[s]),
                    e4m3x2_to_bf16x2(a_bytes[i][0].w[s] >> 16),
                    e4m3x2_to_bf16x2(a_bytes[i][1].w[s] >> 16)};
                #pragma unroll
                for (uint32_t j = 0; j < kNumMmaN; ++j)
                    mma_bf16_16816(accum[i][j], a_frag, b_frag[j]);
            }
        }
    }
}

}  // namespace dgemm::portable
