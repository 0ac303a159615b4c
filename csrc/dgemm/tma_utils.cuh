#pragma once
// TMA (cp.async.bulk.tensor) wrappers. The descriptor is built on the host with
// cuTensorMapEncodeTiled and passed by value as a __grid_constant__ kernel parameter.
#include "sync_utils.cuh"

namespace dgemm {

// Same size and alignment as the driver's CUtensorMap; opaque to device code.
struct alignas(64) TmaDescriptor {
    uint64_t opaque[16];
};

__device__ __forceinline__ void tma_prefetch_descriptor(const TmaDescriptor* desc) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(desc) : "memory");
}

// Load the box at (inner, outer) into `smem_dst`, completing `bytes` on `barrier`.
__device__ __forceinline__ void tma_load_2d(const TmaDescriptor* desc, MBarrier* barrier,
                                            void* smem_dst, int32_t inner, int32_t outer) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 :: "r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(barrier)),
                    "r"(inner), "r"(outer)
                 : "memory");
}

// Same, but the box lands at the same offset in every CTA of `cta_mask` (and completes each
// CTA's barrier at the same offset).
__device__ __forceinline__ void tma_load_2d_multicast(const TmaDescriptor* desc, MBarrier* barrier,
                                                      void* smem_dst, int32_t inner, int32_t outer,
                                                      uint16_t cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;"
                 :: "r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(barrier)), "h"(cta_mask),
                    "r"(inner), "r"(outer)
                 : "memory");
}

// Store the box at (inner, outer) from `smem_src` (bulk async group; rows/columns outside the
// tensor are clipped by the hardware).
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* desc, const void* smem_src,
                                             int32_t inner, int32_t outer) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(desc), "r"(smem_addr(smem_src)), "r"(inner), "r"(outer) : "memory");
}

// Add the box at (inner, middle, outer) from `smem_src` to the fp32 tensor in global memory
// (element-wise `+=`, performed at L2; bulk async group; out-of-tensor parts are clipped).
__device__ __forceinline__ void tma_reduce_add_3d(const TmaDescriptor* desc, const void* smem_src,
                                                  int32_t inner, int32_t middle, int32_t outer) {
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3, %4}], [%1];"
                 :: "l"(desc), "r"(smem_addr(smem_src)), "r"(inner), "r"(middle), "r"(outer)
                 : "memory");
}

__device__ __forceinline__ void tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until all but the kPending most recent committed store groups have finished reading
// shared memory (their buffers may be rewritten); with kReadOnly false, until they have
// completed.
template <bool kReadOnly, uint32_t kPending = 0>
__device__ __forceinline__ void tma_store_wait() {
    if constexpr (kReadOnly)
        asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(kPending) : "memory");
    else
        asm volatile("cp.async.bulk.wait_group %0;" :: "n"(kPending) : "memory");
}

}  // namespace dgemm
