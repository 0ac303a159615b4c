"""One GEMM, a few times, for a profiler to look at (Nsight Compute on the GPU machine:
bench/NOTES.md, wgrad v2 and p1): dgemm's kernel (optionally a forced tile) or DeepGEMM
54e2261's on the same inputs. `--recipe dense` is the forward fp8_gemm_nt (BF16 out; a tile is
BLOCK_MxBLOCK_N[/mc2a|/mc2b], as compare_tiles takes it without stages), `--recipe contiguous` the
MoE contiguous layout (`--groups` groups of M rows each, tiles as dense), `--recipe wgrad` the
weight-gradient GEMM (a tile is BLOCK_Nx1 / x2a / x2b, as bench_wgrad --tile).

    python -m bench.profile_gemm --recipe dense --impl dgemm --tile 128x192 --shape 511 6144 16384
    python -m bench.profile_gemm --recipe contiguous --groups 4 --tile 128x256/mc2b \
        --shape 8192 4096 7168
    python -m bench.profile_gemm --recipe wgrad --impl deep_gemm --shape 4096 7168 8192
"""
from __future__ import annotations

import argparse
import contextlib

import torch

import dgemm
from bench import bench_wgrad
from bench.compare_tiles import parse_tile
from bench.baselines import deep_gemm_contiguous
from bench.inputs import contiguous_case, mn_major, random_dense

WGRAD = (1, 1, 128)


def _dense(impl: str, tile, m: int, n: int, k: int):
    case = random_dense(m, n, k)
    a, b = mn_major(case.a), case.b
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    if impl == "deep_gemm":
        import deep_gemm
        return lambda: deep_gemm.fp8_gemm_nt(a, b, d)
    if tile:   # forced_tile holds for one `with` block: entered per call
        return lambda: _forced_call(tile, a, b, d)
    return lambda: dgemm.fp8_gemm_nt(a, b, d)


def _forced_call(tile, a, b, d) -> None:
    with dgemm.heuristics.forced_tile(*tile):
        dgemm.fp8_gemm_nt(a, b, d)


def contiguous_call(impl: str, tile, a, b, d, layout):
    """One contiguous call on these tensors: DeepGEMM's, or dgemm's (in a forced tile)."""
    if impl == "deep_gemm":
        import deep_gemm
        return deep_gemm_contiguous(deep_gemm, a, b, d, layout)

    def run():
        with (dgemm.heuristics.forced_tile(*tile) if tile else contextlib.nullcontext()):
            dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    return run


def _contiguous(impl: str, tile, m: int, n: int, k: int, groups: int):
    _, a, b, layout, d = contiguous_case(m, n, k, groups)
    return contiguous_call(impl, tile, a, b, d, layout)


def _wgrad(impl: str, tile, m: int, n: int, k: int, stages: int = 0):
    if tile:
        bench_wgrad.force_tile(*tile, stages=stages)
    a, _ = bench_wgrad._quantized(m, k)
    b, _ = bench_wgrad._quantized(n, k)
    d = torch.zeros(m, n, device="cuda")
    module = dgemm
    if impl == "deep_gemm":
        import deep_gemm as module
    return lambda: module.fp8_gemm_nt(a, b, d, c=d, recipe=WGRAD)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", choices=("dense", "contiguous", "wgrad"), default="wgrad")
    parser.add_argument("--impl", choices=("dgemm", "deep_gemm"), default="dgemm")
    parser.add_argument("--tile", help="dense: BLOCK_MxBLOCK_N[/mc2a|/mc2b]; wgrad: BLOCK_Nx1 "
                                       "or x2a / x2b")
    parser.add_argument("--shape", type=int, nargs=3, default=(4096, 7168, 8192),
                        metavar=("M", "N", "K"))
    parser.add_argument("--groups", type=int, default=4,
                        help="contiguous: groups of M rows each")
    parser.add_argument("--stages", type=int, default=0,
                        help="wgrad with --tile: at most this many pipeline stages")
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args(argv)
    dense = args.recipe != "wgrad"
    if args.stages and dense:
        parser.error("--stages is for --recipe wgrad")
    bench_wgrad.check_stages(parser, args.stages, args.tile)
    tile = None
    if args.tile:
        try:
            tile = (parse_tile if dense else bench_wgrad.parse_tile)(args.tile)
        except argparse.ArgumentTypeError as err:
            parser.error(str(err))
    if args.recipe == "contiguous":
        run = _contiguous(args.impl, tile, *args.shape, args.groups)
    elif dense:
        run = _dense(args.impl, tile, *args.shape)
    else:
        run = _wgrad(args.impl, tile, *args.shape, stages=args.stages)
    for _ in range(args.iters):
        run()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
