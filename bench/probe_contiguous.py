import sys, random, torch
sys.path[:0] = ['bench', 'tests/gpu']
import dgemm
from common import kernel_time_us
from helpers import random_contiguous, random_dense, forced_tile
n, k = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(0)
rand_rows = [int(256 * rng.uniform(0.7, 1.3)) for _ in range(32)]
def run_case(name, rows, tile=None):
    case = random_contiguous(rows, n, k)
    a = (case.a[0], dgemm.get_mn_major_tma_aligned_tensor(case.a[1]))
    d = torch.empty(case.m_indices.numel(), n, device='cuda', dtype=torch.bfloat16)
    f = lambda: dgemm.m_grouped_fp8_gemm_nt_contiguous(a, case.b, d, case.m_indices)
    import contextlib
    with (forced_tile(*tile) if tile else contextlib.nullcontext()):
        f(); us = kernel_time_us(f)
    padded = case.m_indices.numel(); valid = sum(rows)
    print(f"{name:<28} tile={tile} valid={valid} padded={padded} {us:7.1f} us  valid-TFLOPS {2*valid*n*k/us/1e6:6.0f}  padded-TFLOPS {2*padded*n*k/us/1e6:6.0f}", flush=True)
for tile in (None, (128, 256, 2), (128, 128), (128, 128, 2)):
    run_case('random 0.7..1.3', rand_rows, tile)
run_case('random padded, 1 group', [sum(-(-r // 128) * 128 for r in rand_rows)])
