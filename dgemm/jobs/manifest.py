"""Shape manifests and presets -> the kernel specs a workload needs.

A manifest is JSON shaped like `dgemm/shapes/deepseek_v3.json`:

    {"dense": {"m": [64, 128], "nk": [[2112, 7168], ...]},
     "grouped_contiguous": [{"groups": 4, "m_per_group": 8192, "n": 4096, "k": 7168}, ...],
     "grouped_masked": [{"groups": 1, "expected_m": 1024, "n": 4096, "k": 7168}, ...]}

Every section is optional; keys this module does not read (notes, `max_m`) are ignored.
Each entry becomes one `Problem` (the arguments of one `heuristics.select` call); many problems
share one spec because M is a run-time argument, so callers dedupe with `specs_for`.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from dgemm.heuristics import KernelSpec, select

PRESET_DIR = Path(__file__).resolve().parent.parent / "shapes"


class ManifestError(ValueError):
    """A manifest or an M range that cannot be read; the message says where and how to fix it."""


@dataclasses.dataclass(frozen=True, order=True)
class Problem:
    """One GEMM call shape: the arguments of `heuristics.select` minus the hardware."""
    kind: str
    m: int
    n: int
    k: int
    num_groups: int = 1


def available_presets() -> list[str]:
    return sorted(path.stem for path in PRESET_DIR.glob("*.json"))


def load_preset(name: str) -> dict:
    path = PRESET_DIR / f"{name}.json"
    if not path.is_file():
        raise ManifestError(f"unknown preset {name!r}; expected one of "
                            f"{', '.join(available_presets()) or '(none installed)'}")
    return load_manifest(path)


def load_manifest(path: str | Path) -> dict:
    try:
        manifest = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ManifestError(f"manifest {path} is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ManifestError(f"manifest {path} must be a JSON object with 'dense', "
                            f"'grouped_contiguous' and/or 'grouped_masked'; got "
                            f"{type(manifest).__name__}")
    return manifest


def parse_m_range(text: str) -> list[int]:
    """'1-256,512,1024-8192:1024' -> sorted unique M values (ranges inclusive, step after ':')."""
    values: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            if "-" in part:
                bounds, _, step = part.partition(":")
                low, high = (int(v) for v in bounds.split("-"))
                values.update(range(low, high + 1, int(step or 1)))
            else:
                values.add(int(part))
        except ValueError as exc:
            raise ManifestError(f"bad M range {part!r} in {text!r}: expected N, LOW-HIGH or "
                                f"LOW-HIGH:STEP, e.g. '1-256,512,1024-8192:1024'") from exc
    if not values or min(values) <= 0:
        raise ManifestError(f"M range {text!r} must name at least one M and only M >= 1")
    return sorted(values)


def problems(manifest: dict, extra_dense_m: list[int] = (),
             contiguous_spread: float = 0.0) -> list[Problem]:
    """Every problem a manifest names. `extra_dense_m` adds M values to the dense shapes;
    `contiguous_spread` s adds every total M the contiguous layout takes when each group's rows
    vary in m_per_group * [1 - s, 1 + s] (see `contiguous_total_ms`)."""
    found: set[Problem] = set()
    dense = manifest.get("dense", {})
    dense_m = set(_ints(dense.get("m", []), "dense.m")) | set(extra_dense_m)
    for index, pair in enumerate(dense.get("nk", [])):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ManifestError(f"manifest dense.nk[{index}] must be [n, k]; got {pair!r}")
        n, k = _ints(pair, f"dense.nk[{index}]")
        found.update(Problem("fp8_gemm_nt", m, n, k) for m in dense_m)
    for index, entry in enumerate(manifest.get("grouped_contiguous", [])):
        where = f"grouped_contiguous[{index}]"
        groups, m_per_group, n, k = _fields(entry, where, "groups", "m_per_group", "n", "k")
        found.update(Problem("m_grouped_fp8_gemm_nt_contiguous", m, n, k, groups)
                     for m in contiguous_total_ms(groups, m_per_group, contiguous_spread))
    for index, entry in enumerate(manifest.get("grouped_masked", [])):
        where = f"grouped_masked[{index}]"
        groups, expected_m, n, k = _fields(entry, where, "groups", "expected_m", "n", "k")
        found.add(Problem("m_grouped_fp8_gemm_nt_masked", expected_m, n, k, groups))
    return sorted(found)


def contiguous_total_ms(groups: int, m_per_group: int, spread: float) -> list[int]:
    """The M a contiguous grouped GEMM is called with: every group's rows stacked, each padded
    to the 128-row alignment. The kernel choice depends on that total, so when the rows per
    group vary in m_per_group * [1 - spread, 1 + spread] every reachable total is listed
    (multiples of 128 between the extremes), plus the nominal groups * m_per_group."""
    if not 0.0 <= spread < 1.0:
        raise ManifestError(f"contiguous spread must be in [0, 1); got {spread!r}")
    align = 128
    lowest = groups * _align_up(math.ceil(m_per_group * (1 - spread)), align)
    highest = groups * _align_up(math.floor(m_per_group * (1 + spread)), align)
    return sorted({groups * m_per_group, *range(lowest, highest + 1, align)})


def _align_up(value: int, align: int) -> int:
    return max(align, (value + align - 1) // align * align)


def specs_for(problem_list: list[Problem], num_sms: int,
              arch: str) -> dict[KernelSpec, list[Problem]]:
    """Dedupe by spec: each spec (sorted by its canonical JSON) with the problems it serves."""
    served: dict[KernelSpec, list[Problem]] = {}
    for problem in problem_list:
        try:
            spec = select(problem.kind, problem.m, problem.n, problem.k, problem.num_groups,
                          num_sms, arch)
        except ValueError as exc:
            raise ManifestError(f"no kernel for {problem}: {exc}") from exc
        served.setdefault(spec, []).append(problem)
    return {spec: served[spec] for spec in sorted(served, key=KernelSpec.to_json)}


def _fields(entry: object, where: str, *names: str) -> list[int]:
    if not isinstance(entry, dict) or any(name not in entry for name in names):
        raise ManifestError(f"manifest {where} must be an object with {', '.join(names)}; "
                            f"got {entry!r}")
    return _ints([entry[name] for name in names], where)


def _ints(values: object, where: str) -> list[int]:
    if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise ManifestError(f"manifest {where} must be a list of positive integers; "
                            f"got {values!r}")
    return values
