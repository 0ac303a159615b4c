"""`dgemm.warmup`: load every kernel a range of calls will need, before a CUDA graph is captured.

A call that finds its kernel loaded launches at once; one that does not compiles or loads it
first, which a stream capturing a CUDA graph must not do (`KernelNotWarmError`). `warmup` takes
the calls a model will make (a GEMM kind with its M values, N and K; or a shape manifest as
`dgemm-cache prewarm` reads it), maps each to its kernel spec with the very selection the calls
use on this device, dedupes (one spec serves many M: M is a run-time argument) and loads each
spec once. The enumeration and the dedupe are prewarm's (`dgemm.jobs.manifest`), so a CPU
prewarm with this GPU's `--arch` and `--num-sms` fills the cache with exactly these kernels.

    dgemm.warmup("fp8_gemm_nt", m=range(1, 4097), n=2112, k=7168)
    dgemm.warmup("m_grouped_fp8_gemm_nt_masked", m=[256], n=4096, k=7168, num_groups=8)
    dgemm.warmup(manifest="deepseek_v3", m="1-4096")   # a preset name or a manifest file/dict

The weight-gradient GEMMs (recipe (1, 1, 128)) warm the same way; their kernels take K at run
time, so an M x N weight needs one kernel whatever the tokens (k may be left out); the
k-grouped GEMM's tile may depend on its group count, so without num_groups the kernels of
every count up to K_GROUPED_WARM_GROUPS (one or two) are loaded:

    dgemm.warmup("fp8_gemm_nt", m=7168, n=2048, recipe=(1, 1, 128))      # dW of a 2048->7168
    dgemm.warmup("k_grouped_fp8_gemm_nt_contiguous", m=4096, n=7168)       # each expert's dW
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Iterable, Optional, Union

import torch

from . import gemm, heuristics
from .jit import env
from .jobs import manifest as manifests
from .kernels.spec import KernelSpec

MValues = Union[int, str, Iterable[int]]


@dataclasses.dataclass(frozen=True)
class WarmupReport:
    """What `warmup` did: how many calls (shape x M) it covered and the distinct kernels it
    loaded on `device`."""
    problems: int
    specs: tuple
    device: int
    seconds: float

    def __str__(self) -> str:
        return (f"dgemm.warmup: {self.problems} calls served by {len(self.specs)} kernels, "
                f"loaded on cuda:{self.device} in {self.seconds:.1f} s")


def warmup(kind: Optional[str] = None, m: Optional[MValues] = None, n: Optional[int] = None,
           k: Optional[int] = None, num_groups: Optional[int] = None, *, recipe=None,
           manifest: Union[None, str, os.PathLike, dict] = None,
           contiguous_spread: float = 0.0, device: Union[None, int, str, torch.device] = None,
           jobs: int = 1) -> WarmupReport:
    """Load every kernel that the given calls need on `device` (default: the current one).

    Arguments:
        kind: "fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous" or
            "m_grouped_fp8_gemm_nt_masked"; with `m`, `n`, `k` (and `num_groups` for the
            grouped kinds). `m` is what the calls pass: the rows of A (dense), the total rows
            m_sum (contiguous), or `expected_m` (masked); an int, an iterable of ints or a
            range string such as "1-4096" or "128-16384:128".
            The weight gradients: "fp8_gemm_nt" with `recipe=(1, 1, 128)` (the calls'
            recipe; "fp8_gemm_nt_wgrad" names the same), or
            "k_grouped_fp8_gemm_nt_contiguous"; `m` and `n` are d's [m, n] (per group), `k`
            (the tokens) may be left out: the kernel takes K at run time. The group count
            (d.shape[0]) can change the k-grouped tile; left out, `num_groups` means every
            count up to K_GROUPED_WARM_GROUPS (usually one or two kernels).
            `num_groups` left out is 1 for every other kind.
        manifest: instead of `kind`: a preset name (e.g. "deepseek_v3"), a manifest file or a
            manifest dict as `dgemm-cache prewarm` reads it; `m` then adds M values to its
            dense shapes and `contiguous_spread` widens its contiguous totals as prewarm's
            `--contiguous-spread` does.
        jobs: compile the kernels no cache tier holds in this many parallel processes first
            (prewarm's pool); 1 compiles them one by one as they are loaded.

    Raises ValueError (or ManifestError, a ValueError) for malformed arguments, RuntimeError
    when called while the current stream captures a CUDA graph, and what loading raises
    (CompileError, MissingKernelError with DGEMM_DISABLE_JIT).
    """
    started = time.perf_counter()
    index = _device_index(device)
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("dgemm.warmup: the current stream is capturing a CUDA graph; call "
                           "warmup before the capture starts (it compiles and loads kernels)")
    problem_list = problems(kind, m, n, k, num_groups, recipe=recipe, manifest=manifest,
                            contiguous_spread=contiguous_spread)
    selection = gemm.selection_for(index)
    served = manifests.specs_for(problem_list, **selection)
    if env.autotune():
        _add_decided_specs(served, problem_list, index, selection)
    if jobs > 1 and served:
        _compile_in_parallel(list(served), jobs)
    for spec, calls in served.items():
        first = calls[0]
        gemm.load_kernel(spec, index, (first.kind, first.m, first.n, first.k, first.num_groups))
    return WarmupReport(len(problem_list), tuple(served), index,
                        time.perf_counter() - started)


def _add_decided_specs(served: dict, problem_list: list, index: int, selection: dict) -> None:
    """With DGEMM_AUTOTUNE on, a call runs its shape class's decision, which may name another
    kernel than the heuristic's: resolve every class now (found in a tier, or timed once in the
    cluster), outside any capture, so the kernels the captured calls will pick are loaded too.
    The weight-gradient GEMMs are not autotuned: their calls run the heuristic's kernel."""
    for problem in problem_list:
        if problem.kind not in heuristics.KINDS:
            continue
        spec = gemm.choose_spec(problem.kind, problem.m, problem.n, problem.k,
                                problem.num_groups, selection["num_sms"], selection["arch"],
                                index)
        served.setdefault(spec, []).append(problem)


def plan(kind: Optional[str] = None, m: Optional[MValues] = None, n: Optional[int] = None,
         k: Optional[int] = None, num_groups: Optional[int] = None, *, num_sms: int, arch: str,
         family: Optional[str] = None, recipe=None, manifest=None,
         contiguous_spread: float = 0.0) -> dict[KernelSpec, list]:
    """The specs `warmup` would load for a GPU of `arch` with `num_sms` SMs, each with the calls
    (`manifest.Problem`) it serves; no GPU needed. With DGEMM_AUTOTUNE on, `warmup` also loads
    the kernels of its shape classes' decisions, which this plan (no GPU to time on) leaves
    out."""
    problem_list = problems(kind, m, n, k, num_groups, recipe=recipe, manifest=manifest,
                            contiguous_spread=contiguous_spread)
    return manifests.specs_for(problem_list, num_sms, arch, family)


_PUBLIC_KINDS = heuristics.KINDS + ("k_grouped_fp8_gemm_nt_contiguous",)


def problems(kind, m, n, k, num_groups=None, *, recipe=None, manifest=None,
             contiguous_spread: float = 0.0) -> list:
    """The calls (`manifest.Problem`) named by `warmup`'s arguments."""
    if manifest is not None:
        if kind is not None or n is not None or k is not None or recipe is not None:
            raise ValueError("dgemm.warmup: pass either a manifest (and optionally m, extra M "
                             "values for its dense shapes) or kind, m, n and k; not both")
        extra = [] if m is None else _m_values(m)
        return manifests.problems(_load_manifest(manifest), extra, contiguous_spread)
    if kind not in _PUBLIC_KINDS + (_WGRAD_DENSE,):
        raise ValueError(f"dgemm.warmup: kind must be one of {', '.join(_PUBLIC_KINDS)} (or "
                         f"pass manifest=...); got {kind!r}")
    wgrad_kind = _wgrad_kind(kind, recipe)
    if wgrad_kind is not None:
        return _wgrad_problems(wgrad_kind, m, n, k, num_groups)
    num_groups = 1 if num_groups is None else num_groups
    if m is None or n is None or k is None:
        raise ValueError(f"dgemm.warmup: {kind} needs m (the M values the calls use), n and k; "
                         f"got m={m!r}, n={n!r}, k={k!r}")
    for name, value in (("n", n), ("k", k), ("num_groups", num_groups)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"dgemm.warmup: {name} must be a positive int; got {value!r}")
    if k % heuristics.BLOCK_K != 0:
        raise ValueError(f"dgemm.warmup: k must be a multiple of {heuristics.BLOCK_K}; got {k}")
    if kind == "fp8_gemm_nt" and num_groups != 1:
        raise ValueError(f"dgemm.warmup: fp8_gemm_nt has no groups; got num_groups={num_groups}")
    return [manifests.Problem(kind, value, n, k, num_groups) for value in _m_values(m)]


_WGRAD_DENSE = "fp8_gemm_nt_wgrad"        # heuristics' kind for fp8_gemm_nt(recipe=(1, 1, 128))


def _wgrad_kind(kind: str, recipe) -> Optional[str]:
    """The weight-gradient kind `kind` with `recipe` names, or None for a forward GEMM."""
    from . import wgrad
    chosen = wgrad.check_recipe("dgemm.warmup", recipe)       # None: the forward recipe
    if kind in heuristics.WGRAD_KINDS:
        if recipe is not None and chosen is None:
            raise ValueError(f"dgemm.warmup: {kind} is a weight-gradient GEMM; its recipe is "
                             f"{wgrad.WGRAD_RECIPE} (or leave recipe out); got {recipe!r}")
        return kind
    if chosen is None:
        return None
    if kind != "fp8_gemm_nt":
        raise ValueError(f"dgemm.warmup: recipe {wgrad.WGRAD_RECIPE} applies to fp8_gemm_nt "
                         f"(and k_grouped_fp8_gemm_nt_contiguous); {kind} runs the forward "
                         f"recipe only")
    return _WGRAD_DENSE


# A k-grouped warm-up without num_groups covers every group count up to this (the tile depends
# on the count through the waves of a launch: hopper_wgrad.launch_waves).
K_GROUPED_WARM_GROUPS = 512


def _wgrad_problems(kind: str, m, n, k, num_groups) -> list:
    """A weight-gradient warm-up: M x N per call (d's shape, per group); K does not enter the
    kernel, so it defaults to one K block. The k-grouped GEMM's group count can change its
    tile: without one, every count up to K_GROUPED_WARM_GROUPS."""
    if m is None or n is None:
        raise ValueError(f"dgemm.warmup: {kind} needs m and n (d is [m, n]"
                         f"{' per group' if kind != _WGRAD_DENSE else ''}); got m={m!r}, "
                         f"n={n!r}")
    k = heuristics.BLOCK_K if k is None else k
    counts = ([1] if kind == _WGRAD_DENSE else range(1, K_GROUPED_WARM_GROUPS + 1)) \
        if num_groups is None else [num_groups]
    for name, value in (("n", n), ("k", k), ("num_groups", counts[-1])):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"dgemm.warmup: {name} must be a positive int; got {value!r}")
    if k % heuristics.BLOCK_K != 0:
        raise ValueError(f"dgemm.warmup: k (the tokens) must be a multiple of "
                         f"{heuristics.BLOCK_K}; got {k}")
    if kind == _WGRAD_DENSE and counts != [1]:
        raise ValueError(f"dgemm.warmup: fp8_gemm_nt has no groups; got num_groups={num_groups}")
    ms = _m_values(m)
    if len(ms) * len(counts) > manifests.MAX_PROBLEMS:
        raise ValueError(f"dgemm.warmup: {len(ms)} m values x {len(counts)} group counts make "
                         f"more than {manifests.MAX_PROBLEMS} calls; pass num_groups (the calls' "
                         f"d.shape[0]) or fewer m values")
    return [manifests.Problem(kind, value, n, k, groups) for value in ms for groups in counts]


def _m_values(m: MValues) -> list:
    if isinstance(m, str):
        return manifests.parse_m_range(m)
    values = [m] if isinstance(m, int) and not isinstance(m, bool) else list(m)
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <=
                             manifests.MAX_DIM for v in values):
        raise ValueError(f"dgemm.warmup: m must be a positive int, an iterable of positive ints "
                         f"or a range string such as '1-4096'; got {m!r}")
    return sorted(set(values))


def _load_manifest(manifest) -> dict:
    if isinstance(manifest, dict):
        manifests.check_sections(manifest)
        return manifest
    if isinstance(manifest, str) and manifest in manifests.available_presets():
        return manifests.load_preset(manifest)
    return manifests.load_manifest(manifest)


def _device_index(device) -> int:
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    parsed = torch.device(device)
    if parsed.type != "cuda":
        raise ValueError(f"dgemm.warmup: device must be a CUDA device; got {device!r}")
    return parsed.index if parsed.index is not None else torch.cuda.current_device()


def _compile_in_parallel(specs: list, jobs: int) -> None:
    """Compile what no tier holds in `jobs` processes (prewarm's pool, which publishes to the
    disk and remote tiers); the loads that follow then read the disk. A failure here is left
    to the load, which raises it with the compiler's log."""
    from .jobs import prewarm
    from .progress import Progress
    prewarm.compile_all(specs, jobs, Progress("warmup", len(specs), enabled=False))
