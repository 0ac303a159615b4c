#pragma once
// mbarrier, named-barrier and fence wrappers (PTX ISA 8.x, sm_90).
#include "utils.cuh"

namespace dgemm {

// The compiler's own conversion (not inline-asm cvta): it folds `base + offset` of shared
// buffers into immediates and keeps warp-uniform addresses in uniform registers.
__device__ __forceinline__ uint32_t smem_addr(const void* ptr) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// A 64-bit transaction barrier living in shared memory.
struct alignas(8) MBarrier {
    uint64_t state;

    __device__ __forceinline__ void init(uint32_t arrive_count) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;"
                     :: "r"(smem_addr(this)), "r"(arrive_count));
    }
    __device__ __forceinline__ void arrive() {
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_addr(this)) : "memory");
    }
    // Arrive on the barrier at the same shared-memory offset in cluster CTA `cta_id`.
    // NOTES: default (.release.cta) semantics: the consumer only read the stage through the
    // async proxy, already complete; a .cluster-scope release made every arrive wait for the
    // warp's outstanding global loads and tripled the k-block time (bench/NOTES.md, v2).
    __device__ __forceinline__ void arrive_cluster(uint32_t cta_id) {
        asm volatile("{ .reg .b32 remote;\n"
                     "mapa.shared::cluster.u32 remote, %0, %1;\n"
                     "mbarrier.arrive.shared::cluster.b64 _, [remote]; }"
                     :: "r"(smem_addr(this)), "r"(cta_id) : "memory");
    }
    // Arrive on the barrier at this offset in cluster CTA `cta_id`, releasing this thread's
    // earlier writes (to the peer's shared memory included) at cluster scope: the peer's
    // `wait<true>` then sees them. Once per tile (the K-split pair's partial sums), never
    // per K block (see arrive_cluster).
    __device__ __forceinline__ void arrive_cluster_release(uint32_t cta_id) {
        asm volatile("{ .reg .b32 remote;\n"
                     "mapa.shared::cluster.u32 remote, %0, %1;\n"
                     "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote]; }"
                     :: "r"(smem_addr(this)), "r"(cta_id) : "memory");
    }
    __device__ __forceinline__ void arrive_expect_tx(uint32_t bytes) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(smem_addr(this)), "r"(bytes) : "memory");
    }
    // Block until the phase with parity `phase` has completed. `kClusterScope`: acquire at
    // cluster scope, so that what a peer CTA wrote before its `arrive_cluster_release` on this
    // barrier is visible after it (the default acquires at CTA scope).
    template <bool kClusterScope = false>
    __device__ __forceinline__ void wait(uint32_t phase) {
        const uint32_t addr = smem_addr(this);
        uint32_t done;
        do {
            if constexpr (kClusterScope)
                asm volatile("{ .reg .pred p;\n"
                             "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                             "selp.u32 %0, 1, 0, p; }"
                             : "=r"(done) : "r"(addr), "r"(phase) : "memory");
            else
                asm volatile("{ .reg .pred p;\n"
                             "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                             "selp.u32 %0, 1, 0, p; }"
                             : "=r"(done) : "r"(addr), "r"(phase) : "memory");
        } while (!done);
    }
};

// The address of this CTA's shared-memory offset `addr` in cluster CTA `cta_id`'s window.
__device__ __forceinline__ uint32_t map_to_cta(uint32_t addr, uint32_t cta_id) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(cta_id));
    return remote;
}

// 16-byte store into another cluster CTA's shared memory whose completion counts 16 bytes on
// that CTA's mbarrier `remote_bar` (both addresses from map_to_cta).
__device__ __forceinline__ void st_async_v4(uint32_t remote, float x, float y, float z, float w,
                                            uint32_t remote_bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], "
                 "{%1, %2, %3, %4}, [%5];"
                 :: "r"(remote), "f"(x), "f"(y), "f"(z), "f"(w), "r"(remote_bar) : "memory");
}

// 16-byte load from this CTA's shared memory.
__device__ __forceinline__ float4 ld_shared_v4(uint32_t addr) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
    return v;
}

// 4-byte global -> shared copy through L1 (cp.async.ca); `src_bytes` 0 writes zeros without
// reading `src`.
__device__ __forceinline__ void cp_async_4_zfill(uint32_t dst, const void* src,
                                                 uint32_t src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// One arrive on `bar` once every cp.async this thread issued before has landed; `.noinc`: it
// is one of the arrivals the barrier was initialised to expect.
__device__ __forceinline__ void cp_async_arrive_noinc(MBarrier* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];"
                 :: "r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;" ::: "memory");
}

// Plain shared-memory load at a 32-bit shared-window address.
__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
    float value;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(value) : "r"(addr));
    return value;
}

// Hide a value's origin from the compiler so that expressions of it are recomputed where
// used (e.g. `base + constant` folded into an instruction's immediate) instead of hoisted
// out of a loop into registers of their own.
__device__ __forceinline__ uint32_t opaque(uint32_t value) {
    asm volatile("" : "+r"(value));
    return value;
}

// Make mbarrier.init visible to the async proxy (TMA) and to other CTAs of the cluster.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Order generic-proxy shared-memory accesses before later async-proxy (TMA/WGMMA) ones.
__device__ __forceinline__ void fence_view_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Barrier among `num_threads` threads (a multiple of 32) using hardware barrier `id` (1..15).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t num_threads) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(num_threads) : "memory");
}

// Arrive on named barrier `id` without waiting (the other `num_threads` minus ours wait).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t num_threads) {
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(num_threads) : "memory");
}

__device__ __forceinline__ uint32_t cluster_cta_rank() {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// What a CTA's setmaxnreg budgets (128 x producer + math threads x math) may add up to: 1024
// short of the SM's 65536. setmaxnreg.inc waits until the registers are free, and budgets of
// exactly 65536 never got them: the forward kernel at 32 + 2 x 240 hung on an H200
// (bench/NOTES.md, session 19, z3). CUTLASS's 40 + 2 x 232 and 24 + 2 x 240 make 64512.
// An enumerator, not a namespace-scope constexpr variable: NVRTC emits those as symbols named
// with a per-compilation ID, and the cubin's bytes then differ from one compile to the next.
enum : uint32_t { kMaxCtaRegisterBudget = 64512 };

template <uint32_t kRegs>
__device__ __forceinline__ void warpgroup_reg_alloc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(kRegs));
}

template <uint32_t kRegs>
__device__ __forceinline__ void warpgroup_reg_dealloc() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(kRegs));
}

// True in exactly one lane of the (converged) warp. Code under it that depends only on
// warp-uniform values can stay in uniform registers (the TMA producer: its per-K-block issue
// chain), unlike code under `lane == 0`, which the compiler treats as divergent per thread.
__device__ __forceinline__ bool elect_one_sync() {
    uint32_t pred = 0;
    asm volatile("{ .reg .pred p;\n"
                 "elect.sync _|p, 0xffffffff;\n"
                 "selp.u32 %0, 1, 0, p; }" : "=r"(pred));
    return pred != 0;
}

__device__ __forceinline__ uint32_t lane_index() {
    uint32_t lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

}  // namespace dgemm
