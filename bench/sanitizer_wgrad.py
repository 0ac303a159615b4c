"""Small weight-gradient calls for compute-sanitizer (memcheck, racecheck):

    compute-sanitizer --tool memcheck --report-api-errors no python -m bench.sanitizer_wgrad
    compute-sanitizer --tool racecheck python -m bench.sanitizer_wgrad --dense-only

Dense `fp8_gemm_nt(..., c=c, recipe=(1, 1, 128))` on odd and tiny M / N (tiles past M and N,
an N below one tile), one and three K blocks, with a separate `c` and with `d is c`; then a
k-grouped call with empty, 128-token and longer groups (per-group descriptors, scale slices at
offsets). Prints calc_diff against fp32 per call (the sanitizer's ERROR SUMMARY is the
result). The shapes are in bench/t0_shapes.json, so a prewarmed cache serves them.
"""
from __future__ import annotations

import argparse

import torch

import dgemm

WGRAD = (1, 1, 128)
DENSE = [(129, 2049, 384), (7, 129, 128), (256, 512, 384)]
K_GROUPED = (129, 257, [128, 0, 384, 256])          # m, n, ks


def _operand(rows: int, k: int):
    if k == 0:                                      # an expert that got no tokens
        return ((torch.empty(rows, 0, dtype=torch.float8_e4m3fn, device="cuda"),
                 torch.empty(rows, 0, device="cuda")), torch.zeros(rows, 0, device="cuda"))
    data, scales = dgemm.per_token_cast_to_fp8(torch.randn(rows, k, device="cuda",
                                                           dtype=torch.bfloat16))
    value = (data.float().view(rows, -1, 128) * scales.unsqueeze(-1)).view(rows, k)
    return (data, scales), value


def dense(m: int, n: int, k: int, in_place: bool) -> None:
    (a, a_value), (b, b_value) = _operand(m, k), _operand(n, k)
    c = torch.randn(m, n, device="cuda")
    expected = c + a_value @ b_value.t()
    d = c if in_place else torch.full_like(c, float("nan"))
    dgemm.fp8_gemm_nt(a, b, d, c=c, recipe=WGRAD)
    torch.cuda.synchronize()
    print("wgrad", m, n, k, "d is c" if in_place else "c, d",
          f"{dgemm.calc_diff(d, expected):.1e}", flush=True)


def k_grouped(m: int, n: int, ks: list) -> None:
    parts = [(_operand(m, k), _operand(n, k)) for k in ks]
    a = (torch.cat([p[0][0][0].flatten() for p in parts]),
         torch.cat([p[0][0][1] for p in parts], dim=1))
    b = (torch.cat([p[1][0][0].flatten() for p in parts]),
         torch.cat([p[1][0][1] for p in parts], dim=1))
    c = torch.randn(len(ks), m, n, device="cuda")
    expected = torch.stack([c[g] + parts[g][0][1] @ parts[g][1][1].t() for g in range(len(ks))])
    d = torch.full_like(c, float("nan"))
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    dgemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=c)
    torch.cuda.synchronize()
    worst = max(dgemm.calc_diff(d[g], expected[g]) for g in range(len(ks)))
    print("k_grouped", m, n, ks, f"{worst:.1e}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dense-only", action="store_true",
                        help="the first dense call only (racecheck is slow)")
    args = parser.parse_args(argv)
    if args.dense_only:
        dense(*DENSE[0], in_place=False)
        return 0
    for shape in DENSE:
        for in_place in (False, True):
            dense(*shape, in_place=in_place)
    k_grouped(*K_GROUPED)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
