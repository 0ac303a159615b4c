"""The warm-up bench's workload and the process that runs it (`bench.bench_warmup` starts one per
phase): vLLM's full DeepGEMM warm-up of a model's FP8 layers, through whatever `import
deep_gemm` gives the process.

vLLM (vllm/model_executor/warmup/deep_gemm_warmup.py, VLLM_DEEP_GEMM_WARMUP=full) calls, for
every FP8 linear layer's weight [N, K], `fp8_gemm_nt` once for each M in 1..max_tokens on
slices of buffers of max_tokens rows (`a[:m]` with row-major scales `s[:m]`, `out[:m]`); and for
every MoE layer's two weights [experts, N, K], `m_grouped_fp8_gemm_nt_contiguous` for each
multiple of the 128-row alignment up to the largest total its chunk can reach
(tokens x top-k + experts x 127, aligned), with one random expert per 128-row block. Both
calls pass disable_ue8m0_cast=True on Hopper. `sweep` makes exactly these calls, enqueued back
to back with one `torch.cuda.synchronize()` at the end (launches of both libraries are
asynchronous: only the JIT in a call blocks the host).

The layers are a preset's (dgemm/shapes/deepseek_v3.json: its dense (N, K) pairs, and the
distinct (N, K) of its contiguous entries as MoE weights with `experts` local experts). vLLM
itself gives DeepGEMM only layers whose N and K are multiples of 128, so it would leave out
DeepSeek-V3's 2112x7168; it is swept here as the preset lists it (SGLang's warm-up takes it).

    python -m bench.warmup_sweep --library dgemm|deepgemm --workload JSON --progress F --result F

prints nothing; it appends a JSON line to --progress about once a second while sweeping (calls
enqueued, seconds, kernels compiled so far), so a phase stopped at its time limit still has a
partial result, and writes --result when done. Run under `python -m dgemm.compat` for dgemm:
the process then imports dgemm's module as `deep_gemm`, as vLLM would.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional

ALIGNMENT = 128                 # rows of each group in the contiguous layout; K per scale
DGEMM_MODULE = "dgemm.compat.deep_gemm"
PROGRESS_EVERY_S = 1.0


# --- the workload -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Workload:
    """The layers and the M values of one warm-up. `dense` and `grouped` are (N, K) pairs;
    every grouped weight has `experts` groups; `topk` experts per token."""
    preset: str
    dense: tuple
    grouped: tuple
    max_m: int
    experts: int
    topk: int

    def __post_init__(self):
        for name in ("max_m", "experts", "topk"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if self.grouped and ALIGNMENT % self.experts != 0:
            # prewarm's manifest names a contiguous total M as experts x m_per_group.
            raise ValueError(f"experts must divide {ALIGNMENT} (1, 2, 4, ..., 128 local "
                             f"experts) so that every total M the sweep calls is expressible "
                             f"in a prewarm manifest; got {self.experts}")

    @classmethod
    def from_preset(cls, name: str, max_m: int, experts: int, topk: int) -> "Workload":
        from dgemm.jobs import manifest as manifests
        shapes = manifests.load_preset(name)
        dense = tuple((n, k) for n, k in shapes.get("dense", {}).get("nk", []))
        grouped = tuple(dict.fromkeys((e["n"], e["k"])
                                      for e in shapes.get("grouped_contiguous", [])))
        return cls(name, dense, grouped, max_m, experts, topk)

    @classmethod
    def from_json(cls, data: dict) -> "Workload":
        return cls(data["preset"], tuple(tuple(p) for p in data["dense"]),
                   tuple(tuple(p) for p in data["grouped"]), data["max_m"], data["experts"],
                   data["topk"])

    def to_json(self) -> dict:
        return {"preset": self.preset, "dense": [list(p) for p in self.dense],
                "grouped": [list(p) for p in self.grouped], "max_m": self.max_m,
                "experts": self.experts, "topk": self.topk}

    def dense_ms(self) -> range:
        return range(1, self.max_m + 1)

    def contiguous_max_m(self) -> int:
        """vLLM's compute_aligned_M without the tokens' real routing: every token's top-k
        rows plus each expert's worst-case padding, aligned."""
        rows = self.max_m * self.topk + self.experts * (ALIGNMENT - 1)
        return -(-rows // ALIGNMENT) * ALIGNMENT

    def contiguous_ms(self) -> range:
        return range(ALIGNMENT, self.contiguous_max_m() + 1, ALIGNMENT)

    def calls(self) -> dict:
        dense = len(self.dense) * len(self.dense_ms())
        grouped = len(self.grouped) * len(self.contiguous_ms())
        return {"dense": dense, "contiguous": grouped, "total": dense + grouped}

    def manifest(self) -> dict:
        """The same calls as a `dgemm-cache prewarm` manifest (run it with
        --contiguous-spread 0): dense M 1..max_m, and each contiguous total M as `experts`
        groups of M / experts rows."""
        contiguous = [{"groups": self.experts, "m_per_group": m // self.experts, "n": n, "k": k}
                      for n, k in self.grouped for m in self.contiguous_ms()]
        manifest = {"about": f"bench.bench_warmup: vLLM's full warm-up of preset "
                             f"{self.preset}, M 1..{self.max_m}, {self.experts} experts, "
                             f"top-{self.topk}"}
        if self.dense:
            manifest["dense"] = {"m": list(self.dense_ms()), "nk": [list(p) for p in self.dense]}
        if contiguous:
            manifest["grouped_contiguous"] = contiguous
        return manifest


# --- the calls ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Layer:
    """One weight and the buffers vLLM's warm-up slices for it."""
    label: str
    kind: str                   # "dense" or "contiguous"
    weight: tuple               # (fp8 [N, K] or [experts, N, K], fp32 block scales)
    a: tuple                    # (fp8 [rows, K], fp32 [rows, K / 128] row-major)
    out: object                 # bf16 [rows, N]
    ms: range
    layout: object = None       # contiguous: int32 [rows], one random expert per 128 rows


def prepare(workload: Workload, device: str = "cuda") -> list:
    """The layers with their buffers, filled with random FP8 values from torch's global
    generator (not zeros: a GEMM on zeros draws less power and runs faster than on a model's
    numbers)."""
    import torch

    def fp8(*shape):
        return torch.randn(*shape, device=device, dtype=torch.bfloat16).to(torch.float8_e4m3fn)

    def scales(*shape):
        return torch.rand(*shape, device=device) * 1e-2 + 1e-3

    def blocks(size):
        return -(-size // ALIGNMENT)

    layers = []
    rows = workload.max_m
    for n, k in workload.dense:
        layers.append(Layer(f"dense {n}x{k}", "dense", (fp8(n, k), scales(blocks(n), k // 128)),
                            (fp8(rows, k), scales(rows, k // 128)),
                            torch.empty(rows, n, device=device, dtype=torch.bfloat16),
                            workload.dense_ms()))
    rows = workload.contiguous_max_m()
    experts = workload.experts
    for n, k in workload.grouped:
        block_experts = torch.randint(0, experts, (rows // ALIGNMENT,), device=device,
                                      dtype=torch.int32)
        layers.append(Layer(f"contiguous {experts}x{n}x{k}", "contiguous",
                            (fp8(experts, n, k), scales(experts, blocks(n), k // 128)),
                            (fp8(rows, k), scales(rows, k // 128)),
                            torch.empty(rows, n, device=device, dtype=torch.bfloat16),
                            workload.contiguous_ms(),
                            block_experts.repeat_interleave(ALIGNMENT)))
    return layers


def sweep(deep_gemm, layers: list,
          tick: Callable[[int, str], None] = lambda calls, at: None) -> int:
    """vLLM's warm-up calls over `layers`, in its order and with its arguments; `tick(calls
    made so far, where)` after each call. Returns the number of calls. Does not synchronize.
    `rows(t, m)` is vLLM's `t[:m]` (the same view), spelt `narrow` so that the sweep also runs
    on fake CUDA tensors in the CPU tests."""
    calls = 0
    for layer in layers:
        data, scales = layer.a
        if layer.kind == "dense":
            for m in layer.ms:
                deep_gemm.fp8_gemm_nt((rows(data, m), rows(scales, m)), layer.weight,
                                      rows(layer.out, m), disable_ue8m0_cast=True)
                calls += 1
                tick(calls, layer.label)
        else:
            for m in layer.ms:
                deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
                    (rows(data, m), rows(scales, m)), layer.weight, rows(layer.out, m),
                    rows(layer.layout, m), disable_ue8m0_cast=True)
                calls += 1
                tick(calls, layer.label)
    return calls


def rows(t, m: int):
    return t.narrow(0, 0, m)


# --- counting kernels ---------------------------------------------------------------------------
def dgemm_entries(cache_dir: Path) -> int:
    """Kernel entries in a dgemm disk tier (<root>/v1/<xx>/<key>.kbin)."""
    root = Path(cache_dir) / "v1"
    return sum(1 for _ in root.glob("*/*.kbin")) if root.is_dir() else 0


def deepgemm_kernels(cache_dir: Path) -> dict:
    """Compiled kernels in a DeepGEMM JIT cache (<root>/cache/kernel.<name>.<hash>/kernel.cubin),
    counted by kernel name."""
    root = Path(cache_dir) / "cache"
    names = collections.Counter()
    if root.is_dir():
        for entry in root.iterdir():
            if entry.name.startswith("kernel.") and (entry / "kernel.cubin").is_file():
                names[entry.name.split(".")[1]] += 1
    return dict(sorted(names.items()))


def kernels_in_cache(library: str, cache_dir: Path) -> int:
    if library == "dgemm":
        return dgemm_entries(cache_dir)
    return sum(deepgemm_kernels(cache_dir).values())


def cache_dir_of(library: str, environ=os.environ) -> Path:
    name = "DGEMM_CACHE_DIR" if library == "dgemm" else "DG_JIT_CACHE_DIR"
    if not environ.get(name):
        raise SystemExit(f"warmup_sweep: {name} must name the phase's cache directory")
    return Path(environ[name])


# --- the process ----------------------------------------------------------------------------------
class Progress:
    """Appends {"calls", "seconds", "kernels", "at"} to a JSON-lines file at most once per
    `every` seconds (and on `flush`)."""

    def __init__(self, path: Path, started: float, kernels: Callable[[], int],
                 every: float = PROGRESS_EVERY_S):
        self.path, self.started, self.kernels, self.every = Path(path), started, kernels, every
        self.last = time.perf_counter()
        self.calls, self.at = 0, ""

    def tick(self, calls: int, at: str) -> None:
        self.calls, self.at = calls, at
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self.flush()

    def flush(self, **extra) -> None:
        line = {"calls": self.calls, "seconds": round(time.perf_counter() - self.started, 3),
                "kernels": self.kernels(), "at": self.at, **extra}
        with open(self.path, "a") as handle:
            handle.write(json.dumps(line) + "\n")


def import_library(library: str):
    """`import deep_gemm`, checked to be the library this phase measures."""
    from bench.baselines import deep_gemm_module
    module = deep_gemm_module()
    name = getattr(module, "__name__", None)
    if library == "dgemm" and name != DGEMM_MODULE:
        raise SystemExit(f"warmup_sweep: `import deep_gemm` gave {module!r}, not dgemm's "
                         f"module; run this under `python -m dgemm.compat`")
    if library == "deepgemm" and (module is None or name != "deep_gemm"):
        raise SystemExit(f"warmup_sweep: `import deep_gemm` gave {module!r}, not DeepGEMM; "
                         f"build it with `source <(bash .anchors/setup_deepgemm.sh)` and run "
                         f"outside `python -m dgemm.compat`")
    return module


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.warmup_sweep",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", choices=("dgemm", "deepgemm"), required=True)
    parser.add_argument("--workload", required=True, help="Workload.to_json() as JSON")
    parser.add_argument("--progress", required=True, type=Path)
    parser.add_argument("--result", required=True, type=Path)
    parser.add_argument("--second-pass", action="store_true",
                        help="sweep again in the same process (every kernel loaded) and time it")
    args = parser.parse_args(argv)
    workload = Workload.from_json(json.loads(args.workload))
    cache_dir = cache_dir_of(args.library)

    started = time.perf_counter()
    import torch
    torch_s = time.perf_counter() - started
    if not torch.cuda.is_available():
        raise SystemExit("warmup_sweep: needs a CUDA GPU (torch.cuda.is_available() is False)")
    deep_gemm = import_library(args.library)
    import_s = time.perf_counter() - started - torch_s
    if args.library == "dgemm":
        import dgemm.jit
        compiled = lambda: dgemm.jit.stats()["compiles"]  # noqa: E731
    else:
        before = kernels_in_cache("deepgemm", cache_dir)
        compiled = lambda: kernels_in_cache("deepgemm", cache_dir) - before  # noqa: E731

    torch.manual_seed(0)
    layers = prepare(workload)
    torch.cuda.synchronize()
    props = torch.cuda.get_device_properties(0)
    result = {"library": args.library, "module": getattr(deep_gemm, "__file__", None),
              "gpu": props.name, "num_sms": props.multi_processor_count,
              "torch_import_seconds": round(torch_s, 3), "import_seconds": round(import_s, 3),
              "prepare_seconds": round(time.perf_counter() - started - torch_s - import_s, 3)}

    sweep_started = time.perf_counter()
    progress = Progress(args.progress, sweep_started, compiled)
    progress.flush()
    calls = sweep(deep_gemm, layers, progress.tick)
    torch.cuda.synchronize()
    result["seconds"] = round(time.perf_counter() - sweep_started, 3)
    result["calls"] = calls
    result["kernels_compiled"] = compiled()
    if args.library == "dgemm":
        result["stats"] = dgemm.jit.stats()
    else:
        result["kernels_by_name"] = deepgemm_kernels(cache_dir)
    result["kernels_in_cache"] = kernels_in_cache(args.library, cache_dir)
    progress.flush(done=True)
    if args.second_pass:
        # Written first: if the second pass is stopped, the first pass's result stands.
        _write(args.result, result)
        second = time.perf_counter()
        sweep(deep_gemm, layers)
        torch.cuda.synchronize()
        result["second_pass_seconds"] = round(time.perf_counter() - second, 3)
        result["second_pass_compiled"] = compiled() - result["kernels_compiled"]
    _write(args.result, result)
    return 0


def _write(path: Path, data: dict) -> None:
    temp = Path(f"{path}.tmp")
    temp.write_text(json.dumps(data, indent=1))
    os.replace(temp, path)


if __name__ == "__main__":
    sys.exit(main())
