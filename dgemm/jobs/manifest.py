"""Shape manifests and presets -> the kernel specs a workload needs.

A manifest is JSON shaped like `dgemm/shapes/deepseek_v3.json`:

    {"dense": {"m": [64, 128], "nk": [[2112, 7168], ...]},
     "grouped_contiguous": [{"groups": 4, "m_per_group": 8192, "n": 4096, "k": 7168}, ...],
     "grouped_masked": [{"groups": 1, "expected_m": 1024, "n": 4096, "k": 7168}, ...],
     "wgrad": {"mn": [[7168, 2048], ...], "k": [4096, 8192]},
     "k_grouped": [{"groups": 4, "m": 4096, "n": 7168, "k_per_group": 8192}, ...]}

The two training sections name the weight-gradient GEMMs (recipe (1, 1, 128)): "wgrad" the
dense `fp8_gemm_nt(..., c=c, recipe=(1, 1, 128))` of an M x N weight over K tokens, "k_grouped"
the MoE experts' `k_grouped_fp8_gemm_nt_contiguous`. Their kernels take K at run time, so the
K values only complete the problem (any K of a layer needs the same kernel).

Every section is optional but at least one must be there; keys this module does not read
(notes, `max_m`) are ignored. Each entry becomes one `Problem` (the arguments of one
`heuristics.select` call); many problems share one spec because M is a run-time argument, so
callers dedupe with `specs_for`. Anything malformed (wrong types, dims outside 1..2**31-1, a
manifest naming no problem, more than MAX_PROBLEMS problems or an M range of more than
MAX_M_VALUES values) raises ManifestError, a ValueError whose message says where and how to
fix it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

from dgemm.kernels.spec import KernelSpec

PRESET_DIR = Path(__file__).resolve().parent.parent / "shapes"
SECTIONS = ("dense", "grouped_contiguous", "grouped_masked", "wgrad", "k_grouped")
_OBJECT_SECTIONS = ("dense", "wgrad")
MAX_DIM = 2**31 - 1             # M, N, K and group counts are 32-bit ints in the kernels
MAX_M_VALUES = 100_000          # one --m-range, or the totals of one contiguous entry
MAX_PROBLEMS = 1_000_000        # each costs one heuristics.select (~0.2 ms)
_MAX_MANIFEST_BYTES = 16 << 20


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
        with open(path, "rb") as handle:    # a pipe (`<(...)`) is fine; its size is bounded
            raw = handle.read(_MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc.strerror or exc}") from exc
    if len(raw) > _MAX_MANIFEST_BYTES:
        raise ManifestError(f"manifest {path} is larger than {_MAX_MANIFEST_BYTES >> 20} MiB; "
                            f"a shape manifest is a few KiB")
    try:
        manifest = json.loads(raw)
    except RecursionError:
        raise ManifestError(f"manifest {path} is nested too deeply to be a shape "
                            f"manifest") from None
    except ValueError as exc:           # not JSON, or not UTF-8
        raise ManifestError(f"manifest {path} is not valid JSON: {exc}") from exc
    check_sections(manifest, f"manifest {path}")
    return manifest


def _is_notes(value: object) -> bool:
    return isinstance(value, str) or (
        isinstance(value, dict) and all(isinstance(note, str) for note in value.values()))


def check_sections(manifest: object, where: str = "manifest") -> None:
    """ManifestError unless `manifest` is an object with at least one known section, each of
    the right JSON type (the entries inside are checked by `problems`), and no other key
    holding an object or a list."""
    if not isinstance(manifest, dict):
        raise ManifestError(f"{where} must be a JSON object with {_sections()}; got a JSON "
                            f"{_json_type(manifest)}")
    present = [name for name in SECTIONS if name in manifest]
    for name, value in manifest.items():
        # Keys beside the sections hold notes (a string, or an object of strings such as
        # layer labels); one holding shapes is a misspelt section whose kernels would
        # silently be left out.
        if name not in SECTIONS and not _is_notes(value):
            raise ManifestError(f'{where}: unknown section "{name}"; expected {_sections()} '
                                f'(other keys may only hold notes: a string, or an object of '
                                f'strings)')
    if not present:
        raise ManifestError(f"{where} names no shapes: expected {_sections()}")
    if "dense" in manifest and not isinstance(manifest["dense"], dict):
        raise ManifestError(f'{where}: "dense" must be an object {{"m": [...], "nk": [[n, k], '
                            f'...]}}; got a JSON {_json_type(manifest["dense"])}')
    if "wgrad" in manifest and not isinstance(manifest["wgrad"], dict):
        raise ManifestError(f'{where}: "wgrad" must be an object {{"mn": [[m, n], ...], "k": '
                            f'[...]}}; got a JSON {_json_type(manifest["wgrad"])}')
    for name in present:
        if name not in _OBJECT_SECTIONS and not isinstance(manifest[name], list):
            raise ManifestError(f'{where}: "{name}" must be a list of objects; got a JSON '
                                f'{_json_type(manifest[name])}')


def parse_m_range(text: str) -> list[int]:
    """'1-256,512,1024-8192:1024' -> sorted unique M values (ranges inclusive, step after ':'),
    at most MAX_M_VALUES of them, each in 1..MAX_DIM."""
    ranges = [_parse_m_part(part, text) for part in filter(None, (p.strip()
                                                                   for p in text.split(",")))]
    if sum(len(r) for r in ranges) > MAX_M_VALUES:
        raise ManifestError(f"M range {_short(text)} names {sum(len(r) for r in ranges)} "
                            f"values; at most {MAX_M_VALUES} (use a step, e.g. "
                            f"'1024-1048576:1024')")
    values = {m for r in ranges for m in r}
    if not values or min(values) <= 0 or max(values) > MAX_DIM:
        raise ManifestError(f"M range {_short(text)} must name at least one M and only "
                            f"1 <= M <= {MAX_DIM}")
    return sorted(values)


def format_m_values(values) -> str:
    """Sorted M values in `parse_m_range`'s syntax, short: runs of three or more values with
    one step (or two neighbours) become LOW-HIGH or LOW-HIGH:STEP, e.g.
    [1, 2, 3, 512, 1024, 2048, 3072] -> '1-3, 512, 1024-3072:1024'."""
    ms = sorted(set(values))
    parts, start = [], 0
    while start < len(ms):
        end = start
        if start + 1 < len(ms):
            step = ms[start + 1] - ms[start]
            end = start + 1
            while end + 1 < len(ms) and ms[end + 1] - ms[end] == step:
                end += 1
            if end - start < 2 and step != 1:
                end = start                  # two values with a gap: list them one by one
        if end == start:
            parts.append(str(ms[start]))
        else:
            step = ms[start + 1] - ms[start]
            parts.append(f"{ms[start]}-{ms[end]}" + (f":{step}" if step != 1 else ""))
        start = end + 1
    return ", ".join(parts)


_ARCH = re.compile(r"^sm_(\d+)([af]?)$")


def check_arch(text: str, minimum: int = 0) -> str:
    """`text` if it names a GPU architecture as dgemm's keys spell it (sm_<number>[a|f], e.g.
    sm_90a for H100/H200, sm_80 for A100, sm_89 for L40S) of at least sm_<minimum>; else a
    ValueError saying so."""
    match = _ARCH.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"arch must be sm_<number> with an optional 'a', e.g. sm_90a (H100, "
                         f"H200), sm_80 (A100), sm_89 (L40S); got {text!r}")
    if int(match.group(1)) < minimum:
        raise ValueError(f"arch must be sm_{minimum} or newer, the oldest architecture dgemm's "
                         f"kernels support; got {text!r}")
    return text


def _parse_m_part(part: str, text: str) -> range:
    try:
        if "-" not in part:
            value = int(part)
            return range(value, value + 1)
        bounds, _, step = part.partition(":")
        low, high = (int(v) for v in bounds.split("-"))
        step = int(step or 1)
        if step <= 0:
            raise ValueError("step must be positive")
        return range(low, high + 1, step)
    except ValueError as exc:
        raise ManifestError(f"bad M range {_short(part)} in {_short(text)}: expected N, "
                            f"LOW-HIGH or LOW-HIGH:STEP, e.g. '1-256,512,1024-8192:1024'") \
            from exc


def problems(manifest: dict, extra_dense_m: list[int] = (),
             contiguous_spread: float = 0.0) -> list[Problem]:
    """Every problem a manifest names. `extra_dense_m` adds M values to the dense shapes;
    `contiguous_spread` s adds every total M the contiguous layout takes when each group's rows
    vary in m_per_group * [1 - s, 1 + s] (see `contiguous_total_ms`)."""
    check_sections(manifest)
    found: set[Problem] = set()
    dense = manifest.get("dense", {})
    dense_m = set(_ints(dense.get("m", []), "dense.m")) | set(
        _ints(list(extra_dense_m), "the extra M values"))
    nk = dense.get("nk", [])
    if not isinstance(nk, list):
        raise ManifestError(f"manifest dense.nk must be a list of [n, k]; got {_short(nk)}")
    _check_count(len(dense_m) * len(nk), "dense M values x nk pairs")
    for index, pair in enumerate(nk):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ManifestError(f"manifest dense.nk[{index}] must be [n, k]; got {_short(pair)}")
        n, k = _ints(pair, f"dense.nk[{index}]")
        found.update(Problem("fp8_gemm_nt", m, n, k) for m in dense_m)
    for index, entry in enumerate(manifest.get("grouped_contiguous", [])):
        where = f"grouped_contiguous[{index}]"
        groups, m_per_group, n, k = _fields(entry, where, "groups", "m_per_group", "n", "k")
        found.update(Problem("m_grouped_fp8_gemm_nt_contiguous", m, n, k, groups)
                     for m in contiguous_total_ms(groups, m_per_group, contiguous_spread))
        _check_count(len(found), "problems")
    for index, entry in enumerate(manifest.get("grouped_masked", [])):
        where = f"grouped_masked[{index}]"
        groups, expected_m, n, k = _fields(entry, where, "groups", "expected_m", "n", "k")
        found.add(Problem("m_grouped_fp8_gemm_nt_masked", expected_m, n, k, groups))
    found.update(_wgrad_problems(manifest))
    _check_count(len(found), "problems")
    if not found:
        raise ManifestError("manifest names no GEMM problem: dense needs M values (\"m\" or "
                            "--m-range) and \"nk\" pairs; grouped sections need entries")
    return sorted(found)


def _wgrad_problems(manifest: dict) -> set[Problem]:
    """The training sections' problems (module docstring)."""
    found: set[Problem] = set()
    wgrad = manifest.get("wgrad", {})
    mn, ks = wgrad.get("mn", []), wgrad.get("k", [])
    if not isinstance(mn, list):
        raise ManifestError(f"manifest wgrad.mn must be a list of [m, n]; got {_short(mn)}")
    ks = _ints(ks, "wgrad.k")
    if mn and not ks:
        raise ManifestError("manifest wgrad names weights (mn) but no token counts; add "
                            "\"k\": [4096, ...] (multiples of 128)")
    for index, pair in enumerate(mn):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ManifestError(f"manifest wgrad.mn[{index}] must be [m, n]; got {_short(pair)}")
        m, n = _ints(pair, f"wgrad.mn[{index}]")
        found.update(Problem("fp8_gemm_nt_wgrad", m, n, k) for k in ks)
    for index, entry in enumerate(manifest.get("k_grouped", [])):
        groups, m, n, k = _fields(entry, f"k_grouped[{index}]", "groups", "m", "n",
                                  "k_per_group")
        found.add(Problem("k_grouped_fp8_gemm_nt_contiguous", m, n, k, groups))
    for problem in found:
        if problem.k % 128:
            raise ManifestError(f"manifest: the training sections' K must be multiples of "
                                f"128; got {problem.k} in {problem}")
    return found


def contiguous_total_ms(groups: int, m_per_group: int, spread: float) -> list[int]:
    """The M a contiguous grouped GEMM is called with: every group's rows stacked, each padded
    to the 128-row alignment. The kernel choice depends on that total, so when the rows per
    group vary in m_per_group * [1 - spread, 1 + spread] every reachable total is listed
    (multiples of 128 between the extremes), plus the nominal groups * m_per_group."""
    if not (isinstance(spread, (int, float)) and not isinstance(spread, bool)
            and 0.0 <= spread < 1.0):
        raise ManifestError(f"contiguous spread must be a number in [0, 1); got {_short(spread)}")
    align = 128
    lowest = groups * _align_up(math.ceil(m_per_group * (1 - spread)), align)
    highest = groups * _align_up(math.floor(m_per_group * (1 + spread)), align)
    if highest > MAX_DIM:
        raise ManifestError(f"{groups} groups of up to {m_per_group} rows (spread {spread:g}) "
                            f"reach a total M of {highest}; at most {MAX_DIM}")
    totals = range(lowest, highest + 1, align)
    if len(totals) > MAX_M_VALUES:
        raise ManifestError(f"{groups} groups of {m_per_group} rows with spread {spread:g} "
                            f"reach {len(totals)} total M values; at most {MAX_M_VALUES} "
                            f"(lower --contiguous-spread)")
    return sorted({groups * m_per_group, *totals})


def _align_up(value: int, align: int) -> int:
    return max(align, (value + align - 1) // align * align)


def specs_for(problem_list: list[Problem], num_sms: int, arch: str,
              family: str | None = None) -> dict[KernelSpec, list[Problem]]:
    """Dedupe by spec: each spec (sorted by its canonical JSON) with the problems it serves.
    `family` forces a kernel family as `heuristics.select` does (None: the arch's own)."""
    from dgemm.heuristics import select     # here: it imports torch, which `--help` must not
    served: dict[KernelSpec, list[Problem]] = {}
    for problem in problem_list:
        try:
            spec = select(problem.kind, problem.m, problem.n, problem.k, problem.num_groups,
                          num_sms, arch, family=family)
        except ValueError as exc:
            raise ManifestError(f"no kernel for {problem}: {exc}") from exc
        served.setdefault(spec, []).append(problem)
    return {spec: served[spec] for spec in sorted(served, key=KernelSpec.to_json)}


def decided_specs_for(problem_list: list[Problem], num_sms: int,
                      arch: str) -> dict[KernelSpec, list[Problem]]:
    """The kernels that published autotuning decisions (`dgemm-cache tune`, DGEMM_AUTOTUNE)
    name for the problems' shape classes, with the problems they serve; classes without a
    decision, and problems whose calls would not run it (`tuner.decision_applies`), are left
    out (their calls run the heuristic's kernel, which `specs_for` has)."""
    from dgemm.autotune import shape_class, tuner
    from dgemm.heuristics import KINDS, select
    by_class: dict = {}
    for problem in problem_list:
        if problem.kind not in KINDS:        # the weight-gradient GEMMs are not autotuned
            continue
        cls = shape_class(problem.kind, problem.m, problem.n, problem.k, problem.num_groups,
                          num_sms, arch)
        heuristic = select(problem.kind, problem.m, problem.n, problem.k, problem.num_groups,
                           num_sms, arch)
        if tuner.decision_applies(cls, heuristic):
            by_class.setdefault(cls, []).append(problem)
    served: dict[KernelSpec, list[Problem]] = {}
    for cls, problems in by_class.items():
        spec = tuner.published_spec(cls)
        if spec is not None:
            served.setdefault(spec, []).extend(problems)
    return served


def _fields(entry: object, where: str, *names: str) -> list[int]:
    if not isinstance(entry, dict) or any(name not in entry for name in names):
        raise ManifestError(f"manifest {where} must be an object with {', '.join(names)}; "
                            f"got {_short(entry)}")
    return _ints([entry[name] for name in names], where)


def _ints(values: object, where: str) -> list[int]:
    if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_DIM
            for v in values):
        raise ManifestError(f"manifest {where} must be a list of integers in 1..{MAX_DIM}; "
                            f"got {_short(values)}")
    return values


def _check_count(count: int, what: str) -> None:
    if count > MAX_PROBLEMS:
        raise ManifestError(f"manifest names {count} {what}; at most {MAX_PROBLEMS} (split it "
                            f"or narrow --m-range)")


def _sections() -> str:
    return ", ".join(f'"{name}"' for name in SECTIONS[:-1]) + f' and/or "{SECTIONS[-1]}"'


def _json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _short(value: object) -> str:
    """A value from a manifest or the command line in one short line (containers by type and
    size only: their repr could be huge or nested too deeply to print)."""
    if isinstance(value, (list, dict)) and (len(value) > 8 or any(
            isinstance(item, (list, dict)) for item in
            (value.values() if isinstance(value, dict) else value))):
        return f"a JSON {_json_type(value)} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
