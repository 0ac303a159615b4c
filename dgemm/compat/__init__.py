"""DeepGEMM compatibility: `dgemm.compat.deep_gemm` is DeepGEMM 54e2261's Hopper API served by
dgemm, and `python -m dgemm.compat COMMAND ...` runs an unchanged program (vLLM, SGLang) with
`import deep_gemm` loading it. `dgemm.compat.alias.install()` does the same inside the current
process. Nothing is imported here, so the start-up hook stays cheap.
"""
