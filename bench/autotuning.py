"""`--autotune` for the benchmarks: dgemm runs with DGEMM_AUTOTUNE=1, every shape class of the
run is tuned first (its candidates compiled in parallel with the rest of the run's kernels,
then timed by `dgemm.autotune.tune_class`, or their decisions found in the cache tiers), and the
timed "dgemm" column is the public call with those decisions. The heuristic's own pick, when the
decision differs, is timed beside it in the same rounds (column "heuristic").
"""
from __future__ import annotations

import os

import dgemm


def enable() -> None:
    os.environ["DGEMM_AUTOTUNE"] = "1"


def shape_class(kind: str, m: int, n: int, k: int, groups: int = 1):
    from dgemm.autotune import shape_class as make
    from dgemm.kernels import hopper_fp8
    return make(kind, m, n, k, groups, dgemm.get_num_sms(), hopper_fp8.ARCHS[0])


def candidate_specs(kind: str, m: int, n: int, k: int, groups: int = 1) -> list:
    """What tuning the call's class will time (to precompile in parallel)."""
    from dgemm.autotune import classes
    from dgemm.jit import env
    return classes.candidates(shape_class(kind, m, n, k, groups), env.autotune_top_k())


def tune(calls: list) -> dict:
    """Tune the class of every (kind, m, n, k, groups) call; prints one line per class."""
    from dgemm.autotune import tune_class
    from dgemm.autotune.tuner import tile_name
    import dgemm.jit
    before = dgemm.jit.stats()["autotune_timings"]
    tuned = {}
    for call in calls:
        cls = shape_class(*call)
        if cls in tuned:
            continue
        tuned[cls] = result = tune_class(cls, 0)
        chosen = tile_name(result.spec) if result.spec is not None else "heuristic"
        print(f"  tune {cls.describe()}: {result.source} -> {chosen} (heuristic "
              f"{tile_name(result.heuristic)}){' ' + result.reason if result.reason else ''}",
              flush=True)
    print(f"autotuned {len(tuned)} classes ({dgemm.jit.stats()['autotune_timings'] - before} "
          f"timed here)", flush=True)
    return tuned


def chosen_spec(kind: str, m: int, n: int, k: int, groups: int = 1):
    """The spec the public call runs now (the class's decision, else the heuristic's)."""
    from dgemm.gemm import choose_spec
    from dgemm.kernels import hopper_fp8
    return choose_spec(kind, m, n, k, groups, dgemm.get_num_sms(), hopper_fp8.ARCHS[0], 0)
