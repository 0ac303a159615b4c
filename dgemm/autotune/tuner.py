"""The autotuner: which kernel a call runs when DGEMM_AUTOTUNE is on.

    spec_for_call(kind, m, n, k, groups, num_sms, arch, heuristic, device_index) -> KernelSpec
        the launch path's hook (dgemm.gemm): one dict lookup once the call's class is known
    tune_class(cls, ...) -> Tuned
        resolve one class now (the `dgemm-cache tune` job, benchmarks)
    published_spec(cls) -> KernelSpec | None
        the class's decision if one was published (prewarm), never timing

The first time a shape class (`classes.ShapeClass`) is seen, the cost model's best
DGEMM_AUTOTUNE_TOP_K candidates are timed on the GPU (`timing.time_candidates`) and the
fastest (if at least MIN_GAIN faster than the heuristic's pick in total and at most MIN_GAIN
slower on each of the class's representative problems, else that pick) becomes the
class's *decision*, published through `dgemm.jit.decisions` (memory,
disk, Redis; verified like kernel entries, HMAC-signed with a secret). One process of the
cluster times; every other waits (at most DGEMM_AUTOTUNE_WAIT seconds) and uses the same
decision, so every rank runs the same kernel and gets bitwise the same result.

A decision serves the calls of its class whose cost-model pick is the one at the M the class
was timed at (`decision_applies`); a call elsewhere in the M bucket, where the model's pick
differs, runs the model's pick and never tunes.
The call runs the heuristic's own kernel instead (logged once per class, counted as
`autotune_fallbacks`) when no decision can be had: the wait ran out, Redis is unreachable,
the timing failed, or the stored decision was refused (corrupt, forged, unsigned while
DGEMM_CACHE_SECRET is set, or naming a kernel that is not one of this build's candidates for
the class). While the current stream is capturing a CUDA graph nothing is timed or waited
for: a decision already in memory or on local disk is used, else the heuristic (not
remembered, so a later eager call may still tune the class). Tiles forced with
`heuristics.forced_tile` and the portable family are never tuned.

`timer` (on both functions) is the seam for tests and tools: a callable
(specs, shape_class, device_index) -> [seconds per spec]; default the GPU timer (the
profiler's kernel records for `tune_class`, CUDA events for a call's class: autotune/timing.py).
`is_capturing` likewise replaces torch's capture check.
"""
from __future__ import annotations

import dataclasses
import json
import math
import threading
from typing import Callable, Optional

from .. import heuristics
from ..jit import compiler as compiler_module
from ..jit import decisions, env, source, state, stats
from ..jit.logs import logger, warning_once
from ..kernels import hopper_fp8
from ..kernels.spec import KernelSpec
from . import classes
from .classes import ShapeClass

# Seconds per candidate: one figure, or one per representative problem (the masked layout's
# draws), which a replacement of the heuristic's pick must not lose on (`_best`).
Timer = Callable[[list, ShapeClass, Optional[int]], list]

_by_call = state.table("autotune.by_call")     # (call args, fingerprint) -> spec
_by_class = state.table("autotune.by_class")   # (class, fingerprint) -> spec or None (heuristic)
_class_locks = state.table("autotune.class_locks")
_locks_guard = threading.Lock()
_MAX_CALLS = 16384
# Another candidate replaces the heuristic's pick only when it is at least this much faster:
# closer than that is timing noise, and keeping the heuristic's kernel then costs nothing.
MIN_GAIN = 0.02


@dataclasses.dataclass(frozen=True)
class Tuned:
    """What resolving one class gave."""
    shape_class: ShapeClass
    key: Optional[str]            # the decision's key; None when the class is not tuned
    source: str                   # decisions.MEMORY/DISK/REMOTE/DECIDED, or NONE
    spec: Optional[KernelSpec]    # the decided kernel; None: calls use the heuristic's
    heuristic: KernelSpec         # the cost model's pick at the representative M
    reason: str = ""              # why there is no decision
    payload: Optional[dict] = None


def spec_for_call(kind: str, m: int, n: int, k: int, num_groups: int, num_sms: int, arch: str,
                  heuristic: KernelSpec, device_index: Optional[int] = None, *,
                  timer: Optional[Timer] = None,
                  is_capturing: Optional[Callable[[], bool]] = None) -> KernelSpec:
    """The kernel a call runs with autotuning on: its class's decision, else `heuristic` (what
    `heuristics.select` returned for this call)."""
    memo = (kind, m, n, k, num_groups, num_sms, arch, heuristic, env.build_fingerprint())
    spec = _by_call.get(memo)
    if spec is not None:
        return spec
    if heuristic.kernel != hopper_fp8.NAME or heuristic != hopper_fp8.select(
            heuristics.GEMM_TYPES[kind], m, n, k, num_groups, num_sms):
        return heuristic        # the portable family, or a forced tile: never tuned
    cls = classes.shape_class(kind, m, n, k, num_groups, num_sms, arch)
    if not decision_applies(cls, heuristic):
        decided, remember = None, True
    else:
        capturing = (is_capturing or _stream_is_capturing)()
        decided, remember = _class_spec(cls, device_index, timer, capturing)
    spec = decided or heuristic
    if remember:
        if len(_by_call) >= _MAX_CALLS:
            _by_call.clear()
        _by_call[memo] = spec
    return spec


def decision_applies(cls: ShapeClass, heuristic: KernelSpec) -> bool:
    """Whether a call of `cls` whose cost-model pick is `heuristic` runs the class's decision:
    only where the model picks the same kernel as at the M the class is timed at. Elsewhere in
    the M bucket the model sees another regime (another count of m-blocks or waves) and its
    own pick runs. NOTES (session 34, n3): at M = 777, decisions timed at 1024 ran up to
    1.22x slower than the model's pick (0.966x DeepGEMM at 777x129280x7168, 1.055 with it)."""
    return heuristic == hopper_fp8.select(heuristics.GEMM_TYPES[cls.kind],
                                          classes.representative_m(cls), cls.n, cls.k,
                                          cls.num_groups, cls.num_sms)


def tune_class(cls: ShapeClass, device_index: Optional[int] = None, *,
               timer: Optional[Timer] = None) -> Tuned:
    """Resolve `cls` now: find its decision in a tier or time it (once in the cluster). A
    tuning step of its own, so kernels are timed by the profiler's records (autotune/timing.py);
    a class first met by a call inside a job is timed with CUDA events instead."""
    return _resolve(cls, device_index, timer or _profiled_timer, capturing=False)


def _profiled_timer(specs: list, cls, device_index) -> list:
    from .timing import time_candidates_by_problem   # torch.cuda work only when timing
    return time_candidates_by_problem(specs, cls, device_index, profiler=True)


def published_spec(cls: ShapeClass) -> Optional[KernelSpec]:
    """The kernel `cls`'s published decision names (memory, disk or Redis), or None when
    there is none (or it is refused); never times or waits."""
    candidate_specs = classes.candidates(cls, env.autotune_top_k())
    key = decision_key(cls, candidate_specs)
    if key is None:
        return None
    resolution = decisions.fetch(key)
    return _chosen_spec(resolution.payload, candidate_specs) if resolution.found else None


# ------------------------------------------------------------------------------------------
def _class_spec(cls: ShapeClass, device_index, timer, capturing: bool) -> tuple:
    """(decided spec or None, whether calls may remember the answer)."""
    memo = (cls, env.build_fingerprint())
    if memo in _by_class:
        return _by_class[memo], True
    with _lock_for(memo):          # threads of one process resolve a class once
        if memo in _by_class:
            return _by_class[memo], True
        tuned = _resolve(cls, device_index, timer, capturing)
        if tuned.spec is None and tuned.key is not None:
            stats.incr("autotune_fallbacks")
            warning_once(f"autotune:{tuned.key}", "dgemm: autotuning %s: using the heuristic's "
                         "kernel (%s)", cls.describe(), tuned.reason)
        if capturing and tuned.spec is None:
            return None, False     # a later eager call may still tune the class
        _by_class[memo] = tuned.spec
        return tuned.spec, True


def decision_key(cls: ShapeClass, candidate_specs: Optional[list] = None,
                 settings: Optional[env.Settings] = None) -> Optional[str]:
    """The key of `cls`'s decision under the current settings (compiler, csrc tree,
    DGEMM_AUTOTUNE_TOP_K); None when the class is not tuned (nothing to choose from)."""
    settings = settings or env.Settings.from_env()
    if candidate_specs is None:
        candidate_specs = classes.candidates(cls, env.autotune_top_k())
    if cls.arch not in hopper_fp8.ARCHS or len(candidate_specs) < 2:
        return None
    compiler = compiler_module.get_compiler(settings.compiler, settings.debug)
    return decisions.decision_key(classes.decision_fields(
        cls, candidate_specs, source.tree_digest(source.csrc_dir()), compiler.identity,
        compiler.flags(candidate_specs[0])))


def _resolve(cls: ShapeClass, device_index, timer, capturing: bool) -> Tuned:
    settings = env.Settings.from_env()
    candidate_specs = classes.candidates(cls, env.autotune_top_k())
    heuristic = candidate_specs[0]
    key = decision_key(cls, candidate_specs, settings)
    if key is None:
        return Tuned(cls, None, decisions.NONE, None, heuristic, "nothing to choose from")
    if capturing:
        resolution = decisions.lookup(key, settings)
    else:
        resolution = decisions.resolve(
            key, lambda: _decide(cls, candidate_specs, device_index, timer), settings,
            env.autotune_wait())
    if not resolution.found:
        return Tuned(cls, key, resolution.source, None, heuristic, resolution.reason)
    spec = _chosen_spec(resolution.payload, candidate_specs)
    if spec is None:
        reason = (f"the decision {key[:12]} names no kernel among this build's candidates "
                  f"for the class")
        decisions.refuse(key, reason)
        return Tuned(cls, key, resolution.source, None, heuristic, reason, resolution.payload)
    return Tuned(cls, key, resolution.source, spec, heuristic, "", resolution.payload)


def _decide(cls: ShapeClass, candidate_specs: list, device_index, timer) -> dict:
    if timer is None:
        from .timing import time_candidates_by_problem   # torch.cuda work only when timing
        timer = time_candidates_by_problem
    per_problem = [_figures(t) for t in timer(candidate_specs, cls, device_index)]
    stats.incr("autotune_timings")
    if len(per_problem) != len(candidate_specs) or len({len(t) for t in per_problem}) > 1:
        raise decisions.NoDecision(f"the timer returned {len(per_problem)} times (or uneven "
                                   f"problem counts) for {len(candidate_specs)} candidates")
    seconds = [sum(t) for t in per_problem]
    best = _best(per_problem)
    if best is None:
        raise decisions.NoDecision("no candidate could be timed")
    logger.info("dgemm.autotune: %s -> %s (%.1f us; heuristic %s)", cls.describe(),
                tile_name(candidate_specs[best]), seconds[best] * 1e6,
                tile_name(candidate_specs[0]))
    return {"class": dataclasses.asdict(cls),
            "spec": json.loads(candidate_specs[best].to_json()),
            "timings": [{"tile": tile_name(spec), "seconds": _finite(sum(t)),
                         **({"problems": [_finite(x) for x in t]} if len(t) > 1 else {})}
                        for spec, t in zip(candidate_specs, per_problem)]}


def _figures(times) -> list:
    """A candidate's seconds per problem (a lone figure: one problem); not a positive finite
    figure: inf."""
    figures = list(times) if isinstance(times, (list, tuple)) else [times]
    return [float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) and
            math.isfinite(t) and t > 0 else math.inf for t in figures]


def _finite(t: float):
    return t if math.isfinite(t) else None


def _best(per_problem: list) -> Optional[int]:
    """The candidate to run: the fastest in total among those that beat the heuristic's pick
    (index 0) by MIN_GAIN in total and lose to it by no more than MIN_GAIN on any problem; the
    pick itself when none does. NOTES (session 34, n4, n5): summed over the masked layout's
    draws, a tile that needs one more wave on some row counts won by ~3% and then ran up to
    1.17x slower than the pick on the benchmark's rows; every draw is a row count to expect."""
    totals = [sum(t) for t in per_problem]
    timed = [i for i, total in enumerate(totals) if math.isfinite(total)]
    if not timed:
        return None
    heuristic = per_problem[0]
    if not math.isfinite(totals[0]):
        return min(timed, key=lambda i: totals[i])
    better = [i for i in timed if totals[i] <= (1 - MIN_GAIN) * totals[0] and all(
        t <= (1 + MIN_GAIN) * h for t, h in zip(per_problem[i], heuristic))]
    return min(better, key=lambda i: totals[i]) if better else 0


def _chosen_spec(payload: dict, candidate_specs: list) -> Optional[KernelSpec]:
    """The candidate the decision names; None when it names none of them (a decision made by
    another build, or crafted): only a kernel this build offers for the class is run."""
    chosen = payload.get("spec") if isinstance(payload, dict) else None
    for spec in candidate_specs:
        if json.loads(spec.to_json()) == chosen:
            return spec
    return None


def tile_name(spec: KernelSpec) -> str:
    """A spec's tile for reports: 128x256, 128x256 x2A for 2-CTA clusters sharing A, 128x48
    ks2 for K-split pairs, 64x64 13st for a ring deeper than the model's for that tile."""
    cluster = f" x{spec.num_tma_multicast}{'A' if spec.multicast_on_a else 'B'}" \
        if spec.num_tma_multicast > 1 else f" ks{spec.k_split}" if spec.k_split > 1 else ""
    depth = ""
    if spec.kernel == hopper_fp8.NAME and spec.num_stages != hopper_fp8.num_stages(
            spec.block_m, spec.block_n, spec.k, spec.k_split):
        depth = f" {spec.num_stages}st"
    return f"{spec.block_m}x{spec.block_n}{cluster}{depth}"


def _stream_is_capturing() -> bool:
    import torch
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _lock_for(memo) -> threading.Lock:
    with _locks_guard:
        lock = _class_locks.get(memo)
        if lock is None:
            lock = _class_locks[memo] = threading.Lock()
        return lock
