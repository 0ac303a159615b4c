"""Session 32 probe: patch a copy of DeepGEMM 54e2261's sm90_fp8_gemm_1d2d.cuh so that each
CTA writes its event clocks (cycles after its entry, uint32) into the B-scale tensor `sfb` at
its end: [8 * blockIdx.x + i]. Timing only (the scales of later launches are garbage).
    python dg_trace_patch.py DG_ROOT   (DG_ROOT/deep_gemm/include/deep_gemm/impls/...)"""
import pathlib
import sys

p = pathlib.Path(sys.argv[1]) / "deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh"
s = p.read_text()


def rep(old, new):
    global s
    assert s.count(old) == 1, old
    s = s.replace(old, new)


rep("const uint32_t lane_idx = ptx::get_lane_idx();\n",
    "const uint32_t lane_idx = ptx::get_lane_idx();\n"
    "    const long long dgt_entry = clock64();\n"
    "    long long dgt_p0 = 0, dgt_p1 = 0, dgt_m0 = 0, dgt_m1 = 0, dgt_m2 = 0, dgt_m3 = 0;\n")
rep("full_barrier.arrive_and_expect_tx(SMEM_A_SIZE_PER_STAGE + SMEM_B_SIZE_PER_STAGE + SMEM_SFA_SIZE_PER_STAGE);\n",
    "full_barrier.arrive_and_expect_tx(SMEM_A_SIZE_PER_STAGE + SMEM_B_SIZE_PER_STAGE + SMEM_SFA_SIZE_PER_STAGE);\n"
    "                    if (k_block_idx == 0) dgt_p0 = clock64();\n"
    "                    if (k_block_idx == num_total_k_blocks - 1) dgt_p1 = clock64();\n")
rep("            // To safely deconstruct distributed shared barriers",
    "            reinterpret_cast<unsigned*>(sfb)[8 * blockIdx.x + 0] = (unsigned)(dgt_p0 - dgt_entry);\n"
    "            reinterpret_cast<unsigned*>(sfb)[8 * blockIdx.x + 1] = (unsigned)(dgt_p1 - dgt_entry);\n"
    "            // To safely deconstruct distributed shared barriers")
rep("            cutlass::arch::NamedBarrier::sync(kNumMathThreads, 0);\n",
    "            cutlass::arch::NamedBarrier::sync(kNumMathThreads, 0);\n"
    "            dgt_m0 = clock64();\n")
rep("                        full_barriers[stage_idx]->wait(phase);\n\n                        // TODO",
    "                        full_barriers[stage_idx]->wait(phase);\n"
    "                        if (k_block_idx == 0) dgt_m1 = clock64();\n\n                        // TODO")
rep("            // TMA checks\n", "            dgt_m2 = clock64();\n            // TMA checks\n")
rep("                cute::tma_store_arrive();\n            }\n            __syncwarp();\n        }\n",
    "                cute::tma_store_arrive();\n            }\n            __syncwarp();\n"
    "            dgt_m3 = clock64();\n        }\n"
    "        if (threadIdx.x == 0) {\n"
    "            cute::tma_store_wait<0>();\n"
    "            unsigned* t = reinterpret_cast<unsigned*>(sfb) + 8 * blockIdx.x;\n"
    "            t[2] = (unsigned)(dgt_m0 - dgt_entry); t[3] = (unsigned)(dgt_m1 - dgt_entry);\n"
    "            t[4] = (unsigned)(dgt_m2 - dgt_entry); t[5] = (unsigned)(dgt_m3 - dgt_entry);\n"
    "            t[6] = (unsigned)(clock64() - dgt_entry); t[7] = 0xdeadbeefu;\n"
    "        }\n")
p.write_text(s)
print("patched", p)
