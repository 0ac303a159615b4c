#!/usr/bin/env bash
# Session 29, call i1 (H200): (1) DeepGEMM's own configs (DG_PRINT_CONFIGS) on the dense rows
# below 0.99 in h4; (2) the masked holdout with tile sweeps (the 8 x 256, 4096x14336 row reads
# 0.948..0.956 at 192x128); (3) probe .exp/nod: 128x256 tiles without the staged output tile
# (timing only, wrong results), at 3 and 4 stages, to price a fourth stage for the large-M tile;
# main's picks in a second process for the same shapes (ratios against DeepGEMM in each).
set -uo pipefail
export OUT=${OUT:-/tmp/out}; o=$OUT/i1; mkdir -p $o
t0=$SECONDS; say() { echo "== [$(( SECONDS - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $o/gpu.txt 2>&1
[ -f /tmp/dg_env ] || bash .anchors/setup_deepgemm.sh > /tmp/dg_env 2> $o/dg_setup.err
. /tmp/dg_env; python3 -c "import deep_gemm" || say "no DeepGEMM"
left() { echo $(( 585 - (SECONDS - t0) )); }
show() { grep -vE "Warn|warn" $1 | grep -E "^[0-9]+x[0-9]+x|DeepGEMM  |^  [0-9h]" | grep -v cuBLAS-blk | sed 's/x cuBLAS.*x DeepGEMM/xDG/; s#@/work/main/.exp/#@#'; }
say "DeepGEMM's configs"
DG_PRINT_CONFIGS=1 timeout -k 5 $(left) python - > $o/dg_configs.txt 2>&1 <<'PY'
import torch, deep_gemm, dgemm
for m, n, k in [(4096,36864,7168),(3000,8192,28672),(4096,4096,7168),(4096,57344,8192),
                (128,4096,7168),(128,4096,4096),(48,9216,4096),(64,6144,4096),(64,7168,2048),
                (100,37888,3584),(128,59136,8192),(2047,6144,16384)]:
    a = (torch.ones(m, k, device="cuda").to(torch.float8_e4m3fn),
         deep_gemm.get_mn_major_tma_aligned_tensor(torch.ones(m, k // 128, device="cuda")))
    b = (torch.ones(n, k, device="cuda").to(torch.float8_e4m3fn),
         torch.ones((n + 127) // 128, k // 128, device="cuda"))
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, d)
torch.cuda.synchronize()
PY
echo "rc $?"; grep -iE "block|layout" $o/dg_configs.txt | head -20
say "masked holdout sweep"
DG_PRINT_CONFIGS=1 timeout -k 5 $(left) python -m bench.bench_grouped --suite broad --layout masked \
  --part holdout --rounds 5 --sweep 128x128,128x256,128x192,128x160,192x64,128x128/mc2a,192x128/mc2a,128x256/mc2a \
  --json $o/masked.json > $o/masked.txt 2>&1
echo "rc $?"; grep -E "^  masked|^\[|MGroupedMasked" $o/masked.txt | head -30
python - $o/masked.json <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["groups"], r["select_m"], r["n"], r["k"], r["config"], f"{r['deepgemm_ratio']:.3f}",
          " ".join(f"{n}:{e['vs_deepgemm']:.3f}" for n, e in r["extra"].items()))
PY
say "probe nod: 128x256 without the staged tile (timing only)"
git apply .exp/nod/python.patch
DGEMM_PROBE_NO_D=1 timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 \
  --shape 4096,4096,7168 --shape 4096,7168,2048 --shape 4096,5120,8192 --shape 1024,16384,6656 \
  --shape 3000,8192,28672 --config "128x256x3/mc2b@$PWD/.exp/nod/csrc" \
  --config "128x256x4/mc2b@$PWD/.exp/nod/csrc" --config "128x256x4@$PWD/.exp/nod/csrc" \
  --json $o/nod.json > $o/nod.txt 2>&1
echo "rc $?"; show $o/nod.txt
git checkout dgemm/kernels/hopper_fp8.py
say "main's picks, same shapes"
timeout -k 5 $(left) python -m bench.compare_tiles --rounds 5 \
  --shape 4096,4096,7168 --shape 4096,7168,2048 --shape 4096,5120,8192 --shape 1024,16384,6656 \
  --shape 3000,8192,28672 --config heuristic --config 128x256x3/mc2b \
  --json $o/main.json > $o/main.txt 2>&1
echo "rc $?"; show $o/main.txt
say done
cd $OUT && tar czf i1.tgz i1 && rm -rf i1
