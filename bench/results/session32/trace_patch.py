"""Session 32 probe: patch a copy of csrc/dgemm/fp8_gemm.cuh so that each CTA records event
clocks (clock64, in a 32-slot static shared array) and copies them to the module global
`dgemm_trace` [blockIdx.x * 32 + slot] at its end (read by trace_probe.py). Timing only.
    python trace_patch.py DIR    (DIR/dgemm/fp8_gemm.cuh, a copy of csrc/)"""
import pathlib
import sys

p = pathlib.Path(sys.argv[1]) / "dgemm/fp8_gemm.cuh"
s = p.read_text()


def rep(old, new, optional=False):
    global s
    if optional and old not in s:
        return
    assert s.count(old) == 1, old
    s = s.replace(old, new)


rep('namespace dgemm {\n', '''namespace dgemm {

extern "C" __device__ unsigned long long dgemm_trace[1024 * 32];
__shared__ unsigned long long trace_smem[32];
__device__ __forceinline__ unsigned long long trace_clock() {
    unsigned long long c; asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory"); return c;
}
__device__ __forceinline__ void trace_event(uint32_t slot) { trace_smem[slot] = trace_clock(); }
''')
rep('''    if (threadIdx.x == 0) {
        tma_prefetch_descriptor(&tma_a);''', '''    if (threadIdx.x == 0) {
        trace_event(0);
        for (uint32_t i = 1; i < 32; ++i) trace_smem[i] = 0;
        tma_prefetch_descriptor(&tma_a);''')
rep('''    if constexpr (kNumTMAMulticast * kNumKSplit > 1)
        cluster_sync();
    else
        __syncthreads();
''', '''    if constexpr (kNumTMAMulticast * kNumKSplit > 1)
        cluster_sync();
    else
        __syncthreads();
    if (threadIdx.x == 0) trace_event(2);
''')
# early loads (session 32 kernel), if present: the first TMA
rep('''                    full_barriers[s].arrive_expect_tx(bytes);''',
    '''                    if (s == 0) trace_event(3);
                    full_barriers[s].arrive_expect_tx(bytes);''', optional=True)
rep('''                    full->arrive_expect_tx(stage_bytes);''', '''                    if (k_block == 0) trace_event(3);
                    if (k_block == kNumKBlocks - 1) trace_event(13);
                    full->arrive_expect_tx(stage_bytes);''')
rep('''                scales_b_full[slot].arrive();                // release: the stores above''',
    '''                scales_b_full[slot].arrive();                // release: the stores above
                if (lane_idx == 0 and tile_count == 1) trace_event(4);''')
rep('''                full_barriers[s].wait(phase);
                // Scales are read before''', '''                full_barriers[s].wait(phase);
                if (k_block <= 1 and math_thread % 128 == 0) trace_event(5 + k_block);
                if (k_block + 2 >= kNumKBlocks and math_thread % 128 == 0) trace_event(20 + (k_block + 2 - kNumKBlocks));
                // Scales are read before''')
rep('''            // Every K block is promoted: the loader may refill this tile's B-scale slot.
            __syncwarp();''', '''            if (math_thread % 128 == 0) trace_event(7 + math_wg);
            // Every K block is promoted: the loader may refill this tile's B-scale slot.
            __syncwarp();''')
rep('''            if (kSplitK and math_wg == 1)
                return;                     // warpgroup 0 writes the tile
''', '''            if (kSplitK and math_wg == 1)
                return;                     // warpgroup 0 writes the tile
            if (math_thread % 128 == 0) trace_event(9 + math_wg * 16);
''')
rep('''                    tma_store_commit();
                }
                release_staging();
                return;''', '''                    tma_store_commit();
                    trace_event(10 + math_wg * 16);
                }
                release_staging();
                return;''')
rep('''        if (threadIdx.x >= 128 and (threadIdx.x - 128) % 128 == 0)
            tma_store_wait<false>();
    }''', '''        if (threadIdx.x >= 128 and (threadIdx.x - 128) % 128 == 0)
            tma_store_wait<false>();
    }
    if (threadIdx.x == 0) trace_event(15);
    if (threadIdx.x == 128) {
        trace_event(11);
        uint32_t smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        trace_smem[12] = smid;
        unsigned long long g; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
        trace_smem[1] = g;
        for (uint32_t i = 0; i < 32; ++i) dgemm_trace[blockIdx.x * 32 + i] = trace_smem[i];
    }''')
p.write_text(s)
print("patched", p)
