"""Where does the Hopper kernel's time go? Time variants that leave one stage out.

    python bench/probe_mainloop.py [M,N,K,block_m,block_n,stages ...]

Each variant is the real csrc/ with one piece removed by text substitution (no TMA loads, no
WGMMA, no promotion, no epilogue stores), compiled through the normal JIT from a temporary
csrc copy (DGEMM_CSRC_DIR) and timed by bench/run_spec.py in a subprocess. Results are
garbage by design; only the times matter (METHOD.md: "time variants that leave one stage out").
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL = "dgemm/fp8_gemm.cuh"

VARIANTS = {
    "full": [],
    "no-loads": [
        ("full->arrive_expect_tx(kStageBytes);", "full->arrive();"),
        ("tma_load_2d(&tma_a, full, a_dst, k, a_row);", ""),
        ("tma_load_2d(&tma_b, full, smem_b + s * SMEM_B_SIZE_PER_STAGE, k, b_row);", ""),
        ("tma_load_2d(&tma_scales_a, full, smem_scales_a + s * BLOCK_M, sa_col,\n"
         "                                sa_row_base + static_cast<int32_t>(k_block));", ""),
    ],
    "no-mma": [("WGMMA::mma(smem_desc_k128b(desc_a0 + s * (SMEM_A_SIZE_PER_STAGE >> 4) + step),\n"
                "                               smem_desc_k128b(desc_b0 + s * (SMEM_B_SIZE_PER_STAGE >> 4) + step),\n"
                "                               accum, k > 0);", "")],
    "no-promote": [("final_accum[i * 4 + 0] += s0 * accum[i * 4 + 0];", ""),
                   ("final_accum[i * 4 + 1] += s0 * accum[i * 4 + 1];", ""),
                   ("final_accum[i * 4 + 2] += s1 * accum[i * 4 + 2];", ""),
                   ("final_accum[i * 4 + 3] += s1 * accum[i * 4 + 3];", "")],
    "no-stores": [("tma_store_2d(&tma_d, wg_smem_d + c * (WGMMA_M * 128),\n"
                   "                                     static_cast<int32_t>(n_start + c * 64), m_row);",
                   ""),
                  ("*reinterpret_cast<uint4*>(d + (d_row0 + row) * SHAPE_N + n_start + col) = value;",
                   "(void)value;")],
}

def variant_csrc(name: str, edits) -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix=f"dgemm-probe-{name}-"))
    shutil.copytree(ROOT / "csrc", root, dirs_exist_ok=True)
    path = root / KERNEL
    text = path.read_text()
    for old, new in edits:
        if old not in text:
            raise SystemExit(f"probe {name}: pattern not found in {KERNEL}: {old[:60]!r}")
        text = text.replace(old, new)
    path.write_text(text)
    return root


def main(argv) -> int:
    configs = [tuple(int(v) for v in a.split(",")) for a in argv] or [
        (4096, 4096, 7168, 128, 128, 5), (64, 2112, 7168, 64, 32, 16)]
    print(f"{'config':<32} " + " ".join(f"{v:>11}" for v in VARIANTS))
    for config in configs:
        cells = []
        for name, edits in VARIANTS.items():
            env = dict(os.environ, DGEMM_CSRC_DIR=str(variant_csrc(name, edits)))
            out = subprocess.run([sys.executable, "bench/run_spec.py", *map(str, config),
                                  "--iters", "10", "--json"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=300)
            if out.returncode:
                cells.append("error")
                lines = [l for l in out.stderr.splitlines() if "Error" in l or "error" in l]
                print(f"{name}: {lines[-1] if lines else out.stderr[-300:]}", file=sys.stderr)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            cells.append(f"{r['us']:7.1f}us")
        print(f"{'x'.join(map(str, config)):<32} " + " ".join(f"{c:>11}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
