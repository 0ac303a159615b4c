"""Per-kernel launchers: build one kernel's arguments from validated tensors and launch it.

Each module exposes `launch(spec, a, sa, b, sb, d, layout) -> None` (see docs/internals.md):
`portable` for csrc/dgemm/fp8_gemm_portable.cuh (sm_80+), `hopper` for csrc/dgemm/fp8_gemm.cuh.
"""
