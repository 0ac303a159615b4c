"""Weight-gradient GEMMs (recipe (1, 1, 128)) against DeepGEMM 54e2261 in the same run:
dense `fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))` and `k_grouped_fp8_gemm_nt_contiguous`
on DeepSeek-V3's training shapes (dgemm/shapes/deepseek_v3.json: "wgrad", "k_grouped").

    python -m bench.bench_wgrad [--rounds 5] [--quick]

Both implementations get the same fp8 pairs, accumulate in place onto the same fp32 `c`
(`d is c`, the training use), and every row is checked against an fp32 reference before it
is timed (calc_diff < 1e-3). Written in training t0 without a GPU: first run next session
(bench/NOTES.md). TFLOPS count 2 * M * N * K (K = all groups' tokens for k-grouped).
"""
from __future__ import annotations

import argparse
import random

import torch

import dgemm
from bench import baselines, inputs, timing

WGRAD = (1, 1, 128)


def _quantized(rows: int, k: int):
    data, scales = dgemm.per_token_cast_to_fp8(torch.randn(rows, k, device="cuda",
                                                           dtype=torch.bfloat16))
    value = (data.float().view(rows, -1, 128) * scales.unsqueeze(-1)).view(rows, k)
    return (data, scales), value


def dense_case(m: int, n: int, k: int, deep_gemm) -> dict:
    a, a_value = _quantized(m, k)
    b, b_value = _quantized(n, k)
    c = torch.randn(m, n, device="cuda")
    expected = c + a_value @ b_value.t()
    d = c.clone()
    dgemm.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD)
    diff = dgemm.calc_diff(d, expected)
    fns = {"dgemm": lambda: dgemm.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD)}
    if deep_gemm is not None:
        dg_d = c.clone()
        fns["deep_gemm"] = lambda: deep_gemm.fp8_gemm_nt(a, b, dg_d, c=dg_d, recipe=WGRAD)
    return {"flop": 2 * m * n * k, "diff": diff, "fns": fns}


def k_grouped_case(groups: int, m: int, n: int, k_per_group: int, deep_gemm,
                   seed: int = 0) -> dict:
    rng = random.Random(seed)
    ks = [int(k_per_group * rng.uniform(0.7, 1.3)) // 128 * 128 for _ in range(groups)]
    parts = [(_quantized(m, k), _quantized(n, k)) for k in ks]
    a = (torch.cat([p[0][0][0].flatten() for p in parts]),
         torch.cat([p[0][0][1] for p in parts], dim=1))
    b = (torch.cat([p[1][0][0].flatten() for p in parts]),
         torch.cat([p[1][0][1] for p in parts], dim=1))
    c = torch.randn(groups, m, n, device="cuda")
    expected = torch.stack([c[g] + parts[g][0][1] @ parts[g][1][1].t() for g in range(groups)])
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    d = c.clone()
    dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=d)
    diff = max(dgemm.calc_diff(d[g], expected[g]) for g in range(groups))
    fns = {"dgemm": lambda: dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=d)}
    if deep_gemm is not None:
        dg_d = c.clone()
        fns["deep_gemm"] = lambda: deep_gemm.k_grouped_fp8_gemm_nt_contiguous(
            a, b, dg_d, ks, layout, c=dg_d)
    return {"flop": 2 * m * n * sum(ks), "diff": diff, "fns": fns, "ks": ks}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="K = 4096 only, 2 rounds")
    args = parser.parse_args(argv)
    deep_gemm = baselines.deep_gemm_module()
    shapes = inputs.load_shapes()
    rounds = 2 if args.quick else args.rounds
    print(f"# {timing.gpu_name()}; DeepGEMM: {'yes' if deep_gemm else 'not importable'}")
    ratios = []
    cases = [("wgrad", (m, n, k)) for m, n in shapes["wgrad"]["mn"]
             for k in shapes["wgrad"]["k"] if not args.quick or k == 4096]
    cases += [("k_grouped", (e["groups"], e["m"], e["n"], e["k_per_group"]))
              for e in shapes["k_grouped"]]
    print(f"{'kind':10} {'shape':>28} {'diff':>9} {'dgemm TF':>9} {'DG TF':>8} {'ratio':>6}")
    for kind, shape in cases:
        case = dense_case(*shape, deep_gemm) if kind == "wgrad" else k_grouped_case(
            *shape, deep_gemm)
        if case["diff"] >= inputs.DIFF_BAR:
            print(f"{kind:10} {str(shape):>28} {case['diff']:9.2e} WRONG: not timed")
            continue
        samples = timing.interleaved_samples(case["fns"], rounds=rounds)
        tflops = {name: case["flop"] / timing.median(us) / 1e6 for name, us in samples.items()}
        ratio = (timing.median(timing.paired_ratios(samples, "dgemm", "deep_gemm"))
                 if "deep_gemm" in samples else float("nan"))
        if ratio == ratio:
            ratios.append(ratio)
        print(f"{kind:10} {str(shape):>28} {case['diff']:9.2e} {tflops['dgemm']:9.1f} "
              f"{tflops.get('deep_gemm', float('nan')):8.1f} {ratio:6.3f}")
    if ratios:
        print(f"geomean dgemm / DeepGEMM speed: {timing.geomean(ratios):.3f}, "
              f"min {min(ratios):.3f} over {len(ratios)} shapes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
