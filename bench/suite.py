"""Which shapes the benches time, and which of them are held out when a heuristic is fitted.

Two suites, both manifests that prewarm reads too (dgemm/shapes/<name>.json):
- `deepseek_v3`: the 18 dense shapes and the 6 + 6 grouped shapes DeepGEMM publishes; every
  shape is timed; all of it counts as seen ("fit": earlier cost models were fitted to it).
- `broad`: dense layers of many models at M from 1 to 16384, contiguous MoE with uneven groups,
  masked MoE at decode sizes. Prewarm compiles every M of the manifest with every layer; the
  benches time a deterministic sample (below) so that one GPU call can time the whole suite.

The sample and the split are pure functions of the manifest (no randomness that is not seeded by
the shape itself), so every run, every machine and every reader sees the same shapes:
- dense: the manifest's M values are cut into four strata (M_STRATA); for each layer (N, K) one
  M per stratum is taken, chosen by a hash of the layer and the stratum among the stratum's M
  whose 2·M·N·K stays under MAX_DENSE_FLOP (a few ms per call; larger ones only cost time);
- contiguous: rows of group g = m_per_group · w_g with w_g log-normal (sigma = the entry's
  `skew`, normalised to mean 1), seeded by the entry; a group may get no rows; each group is
  padded to 128 rows. Entries without `skew` draw U(0.7, 1.3) per group (the BENCH.md recipe);
- masked: masked_m[g] = expected_m · U(0.7, 1.3), at least 1, seeded by the entry.
- weight gradients (`wgrad_cases`): each weight of the manifest's "wgrad" section at one of its
  K, chosen by a hash of the weight among the K under MAX_WGRAD_FLOP, and every "k_grouped"
  entry (K per group as bench_wgrad draws it); DeepSeek-V3's table times every weight at
  every K.
- held out: a layer (N, K) or a grouped entry is in the "holdout" part when the sha256 of its
  key is 0 mod 3 (HOLDOUT_MODULUS); layers (and weights) of the DeepSeek-V3 preset are always
  "fit" (the cost model was fitted to them before this suite existed). Whole layers are held
  out, not single M, so the holdout part asks whether the heuristic carries to layers it never
  saw.
Fit a heuristic on `--part fit` only; judge it on `--part holdout`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import pathlib
import random
from typing import List

SHAPES_DIR = pathlib.Path(__file__).resolve().parent.parent / "dgemm" / "shapes"
SUITES = ("deepseek_v3", "broad")
PARTS = ("fit", "holdout", "all")
M_STRATA = ((1, 32), (33, 128), (129, 1024), (1025, 16384))
MAX_DENSE_FLOP = 6e12
MAX_WGRAD_FLOP = 4e12           # a broad weight gradient's K: at most ~4 ms per call
HOLDOUT_MODULUS = 3
ALIGNMENT = 128                 # rows of each contiguous group are padded to this


@dataclasses.dataclass(frozen=True)
class DenseShape:
    m: int
    n: int
    k: int
    part: str = "fit"
    label: str = ""


@dataclasses.dataclass(frozen=True)
class GroupedCase:
    layout: str                 # "contiguous" or "masked"
    n: int
    k: int
    rows: tuple                 # valid rows of each group
    part: str = "fit"
    label: str = ""
    expected_m: int = 0         # masked: the hint handed to the kernel
    max_m: int = 0              # masked: rows per group in A and D
    nominal_m: int = 0          # contiguous: m_per_group; masked: expected_m

    @property
    def groups(self) -> int:
        return len(self.rows)

    @property
    def valid_m(self) -> int:
        return sum(self.rows)

    @property
    def padded_m(self) -> int:
        """Contiguous: the M the kernel is called with (each group padded to 128 rows)."""
        return max(ALIGNMENT, sum(-(-r // ALIGNMENT) * ALIGNMENT for r in self.rows))

    def key(self) -> str:
        return grouped_key(self.layout, self.groups, self.nominal_m, self.n, self.k)


def load(suite: str) -> dict:
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")
    return json.loads((SHAPES_DIR / f"{suite}.json").read_text())


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def dense_key(n: int, k: int) -> str:
    return f"dense:{n}x{k}"


def grouped_key(layout: str, groups: int, m: int, n: int, k: int) -> str:
    return f"{layout}:{groups}x{m}:{n}x{k}"


def _seen_layers() -> set:
    """(N, K) of the DeepSeek-V3 preset: fitted before, never held out."""
    return {tuple(nk) for nk in load("deepseek_v3")["dense"]["nk"]}


def part_of(key: str, seen: bool = False) -> str:
    return "fit" if seen or _digest(key) % HOLDOUT_MODULUS else "holdout"


def _keep(part: str, wanted: str) -> bool:
    if wanted not in PARTS:
        raise ValueError(f"unknown part {wanted!r}; expected one of {', '.join(PARTS)}")
    return wanted == "all" or part == wanted


def sample_ms(ms: List[int], n: int, k: int) -> List[int]:
    """One M per stratum for the layer (N, K), among the manifest's `ms` (see the docstring)."""
    picked = []
    for index, (low, high) in enumerate(M_STRATA):
        options = [m for m in sorted(set(ms)) if low <= m <= high and 2 * m * n * k <= MAX_DENSE_FLOP]
        if options:
            picked.append(options[_digest(f"m:{n}x{k}:{index}") % len(options)])
    return picked


def dense_shapes(suite: str, part: str = "all") -> List[DenseShape]:
    manifest = load(suite)
    dense = manifest["dense"]
    labels = manifest.get("dense_layers", {})
    seen = _seen_layers()
    shapes = []
    for n, k in (tuple(nk) for nk in dense["nk"]):
        where = part_of(dense_key(n, k), seen=suite == "deepseek_v3" or (n, k) in seen)
        if not _keep(where, part):
            continue
        ms = dense["m"] if suite == "deepseek_v3" else sample_ms(dense["m"], n, k)
        shapes += [DenseShape(m, n, k, where, labels.get(f"{n}x{k}", "")) for m in ms]
    # The manifest's order is by layer; time all layers at one M range together (DeepSeek's
    # table is ordered by M, then layer).
    return sorted(shapes, key=lambda s: (s.m, dense["nk"].index([s.n, s.k])))


def contiguous_rows(entry: dict, key: str) -> tuple:
    rng = random.Random(_digest("rows:" + key))
    groups, m = entry["groups"], entry["m_per_group"]
    if "skew" not in entry:
        return tuple(int(m * rng.uniform(0.7, 1.3)) for _ in range(groups))
    weights = [math.exp(entry["skew"] * rng.gauss(0.0, 1.0)) for _ in range(groups)]
    mean = sum(weights) / groups
    rows = [round(m * w / mean) for w in weights]
    return tuple(rows) if sum(rows) else (1,) + tuple(rows[1:])


def masked_rows(entry: dict, key: str) -> tuple:
    rng = random.Random(_digest("rows:" + key))
    e = entry["expected_m"]
    return tuple(min(entry["max_m"], max(1, int(e * rng.uniform(0.7, 1.3))))
                 for _ in range(entry["groups"]))


def grouped_cases(suite: str, layout: str, part: str = "all") -> List[GroupedCase]:
    manifest = load(suite)
    cases = []
    for entry in manifest[f"grouped_{layout}"]:
        nominal = entry["m_per_group" if layout == "contiguous" else "expected_m"]
        key = grouped_key(layout, entry["groups"], nominal, entry["n"], entry["k"])
        where = part_of(key, seen=suite == "deepseek_v3")
        if not _keep(where, part):
            continue
        rows = (contiguous_rows if layout == "contiguous" else masked_rows)(entry, key)
        cases.append(GroupedCase(layout, entry["n"], entry["k"], rows, where,
                                 entry.get("model", ""),
                                 expected_m=entry.get("expected_m", 0),
                                 max_m=entry.get("max_m", 0), nominal_m=nominal))
    return cases


@dataclasses.dataclass(frozen=True)
class WgradCase:
    """A weight-gradient row: kind "wgrad" with shape (m, n, k), or "k_grouped" with shape
    (groups, m, n, k_per_group)."""
    kind: str
    shape: tuple
    part: str = "fit"
    label: str = ""


def wgrad_key(m: int, n: int) -> str:
    return f"wgrad:{m}x{n}"


def k_grouped_key(groups: int, m: int, n: int, k_per_group: int) -> str:
    return f"k_grouped:{groups}x{m}x{n}:{k_per_group}"


def wgrad_cases(suite: str, kinds=("wgrad", "k_grouped"), part: str = "all",
                quick: bool = False) -> List[WgradCase]:
    """The weight-gradient rows of a suite. DeepSeek-V3: every weight at every K of the preset,
    all "fit". Broad: each weight (a layer, held out as a whole by its key) at one K of the
    manifest, chosen by a hash of the layer among the K whose 2·M·N·K stays under
    MAX_WGRAD_FLOP (a weight with none is not timed); every k-grouped entry, held out by its
    key. `quick`: the dense weights at K = 4096 only."""
    manifest = load(suite)
    seen = {tuple(mn) for mn in load("deepseek_v3")["wgrad"]["mn"]}
    labels = manifest.get("dense_layers", {})
    cases = []
    if "wgrad" in kinds:
        for m, n in (tuple(mn) for mn in manifest["wgrad"]["mn"]):
            where = part_of(wgrad_key(m, n), seen=suite == "deepseek_v3" or (m, n) in seen)
            if not _keep(where, part):
                continue
            ks = [k for k in manifest["wgrad"]["k"] if not quick or k == 4096]
            if suite != "deepseek_v3":
                ks = [k for k in ks if 2 * m * n * k <= MAX_WGRAD_FLOP]
                ks = ks and [ks[_digest("k:" + wgrad_key(m, n)) % len(ks)]]
            cases += [WgradCase("wgrad", (m, n, k), where, labels.get(f"{m}x{n}", ""))
                      for k in ks]
    if "k_grouped" in kinds:
        for e in manifest["k_grouped"]:
            shape = (e["groups"], e["m"], e["n"], e["k_per_group"])
            where = part_of(k_grouped_key(*shape), seen=suite == "deepseek_v3")
            if _keep(where, part):
                cases.append(WgradCase("k_grouped", shape, where, e.get("model", "")))
    return cases


def heuristic_picks(suite: str, num_sms: int = 132) -> dict:
    """{shape key: tile config} the current heuristic picks for every shape of the suite (all
    parts), for `--picks`: run this from another checkout (e.g. before a heuristic change) and
    the benches time that checkout's picks beside today's in the same rounds."""
    from dgemm.heuristics import select

    picks = {}
    for s in dense_shapes(suite):
        picks[f"dense:{s.m}x{s.n}x{s.k}"] = config_name(
            select("fp8_gemm_nt", s.m, s.n, s.k, num_sms=num_sms))
    for layout in ("contiguous", "masked"):
        for case in grouped_cases(suite, layout):
            kind = f"m_grouped_fp8_gemm_nt_{layout}"
            m = case.padded_m if layout == "contiguous" else case.expected_m
            picks[case.key()] = config_name(select(kind, m, case.n, case.k, case.groups,
                                                   num_sms=num_sms))
    return picks


def config_name(spec) -> str:
    """BLOCK_MxBLOCK_NxSTAGES/mc1|mc2a|mc2b|ks2, as bench.compare_tiles reads it."""
    cluster = "ks2" if spec.k_split > 1 else "mc1" if spec.num_tma_multicast == 1 else (
        "mc2a" if spec.multicast_on_a else "mc2b")
    return f"{spec.block_m}x{spec.block_n}x{spec.num_stages}/{cluster}"


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="List a suite's shapes, or write the "
                                     "heuristic's picks for `--picks` (no GPU needed).")
    parser.add_argument("command", choices=("list", "picks"))
    parser.add_argument("--suite", choices=SUITES, default="broad")
    parser.add_argument("--part", choices=PARTS, default="fit")
    parser.add_argument("--num-sms", type=int, default=132)
    args = parser.parse_args(argv)
    if args.command == "picks":
        print(json.dumps(heuristic_picks(args.suite, args.num_sms), indent=0, sort_keys=True))
        return 0
    for s in dense_shapes(args.suite, args.part):
        print(f"dense      {s.m:>6} {s.n:>6} {s.k:>6}  {s.part:<7} {s.label}")
    for layout in ("contiguous", "masked"):
        for c in grouped_cases(args.suite, layout, args.part):
            print(f"{layout:<10} G={c.groups:<3} m={c.nominal_m:<5} {c.n:>6} {c.k:>6}  "
                  f"{c.part:<7} valid {c.valid_m} {c.label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
