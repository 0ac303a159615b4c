"""dgemm's benchmarks, a package run from the repository root:

    python -m bench.bench_gemm          dense GEMM vs cuBLAS-blk and bf16, same run
    python -m bench.bench_grouped       grouped layouts vs DeepGEMM's published figures
    python -m bench.compare_tiles       A/B tile configs and kernel sources vs cuBLAS-blk
    python -m bench.run_spec            one dense config, for ncu and quick timing
    python -m bench.sanitizer_smoke     small calls for compute-sanitizer
    python -m bench.probe_contiguous    where the contiguous layout's many-group cost goes
    python -m bench.bench_cluster       cluster cold start against one redis-server (no GPU)
    python -m bench.bench_warmup        vLLM's full warm-up, cold and warm, dgemm vs DeepGEMM

Shared pieces: `inputs` (random problems and output checks, also used by tests/gpu/),
`timing` (kernel and per-call time), `baselines` (cuBLAS-blk). Importing any module of the
package does no CUDA work; tile configs are forced through the library's public hooks
(`dgemm.heuristics.forced_tile`, `dgemm.kernels.hopper_fp8.with_tile`), never by patching it.
How results are measured and reported: docs/benchmarks.md.
"""
