"""Shape classes: the unit an autotuning decision is made for, and its representative problem.

A class is (kind, N, K, groups, M bucket, arch, SM count). M is bucketed because one kernel
serves every M and a decision per M would never be reused: M is rounded up to the next
*bucket edge*, the powers of two and the numbers halfway between them in log scale
(1.5 x a power of two): 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, ...
so the M of one class differ by at most 1.5x (2x below 4), and a workload's classes are
about two per octave of M. The edge is also the M the class is timed at (`representative`).
For the grouped kinds M is the contiguous layout's total rows (timed with the rows spread over
the groups in 128-row blocks) and the masked layout's expected_m (timed on MASKED_DRAWS
problems whose rows per group spread evenly over 0.7..1.3 x the edge, from light to heavy
load, a candidate's times summed).

The decision key adds what makes a decision right or stale (`decision_fields`): the cost
model's candidates for the class (so a change of the model or of DGEMM_AUTOTUNE_TOP_K retunes),
the digest of the csrc/ tree, the compiler's identity and flags, and TIMING_METHOD.
"""
from __future__ import annotations

import dataclasses
import json

from .. import heuristics
from ..utils import align

# Bump when the way candidates are timed or chosen changes (autotune/timing.py, tuner.py), so
# decisions made the old way are not reused.
TIMING_METHOD = 7
_CONTIGUOUS_BLOCK = 128            # rows of each group of the contiguous layout are padded to this


@dataclasses.dataclass(frozen=True, order=True)
class ShapeClass:
    kind: str              # heuristics.KINDS: fp8_gemm_nt, m_grouped_..._contiguous / _masked
    n: int
    k: int
    num_groups: int
    m_bucket: int          # the bucket edge (see the module docstring)
    arch: str
    num_sms: int

    def describe(self) -> str:
        kind = {"fp8_gemm_nt": "dense", "m_grouped_fp8_gemm_nt_contiguous": "contiguous",
                "m_grouped_fp8_gemm_nt_masked": "masked"}.get(self.kind, self.kind)
        groups = f" G={self.num_groups}" if self.num_groups > 1 else ""
        return f"{kind} M<={self.m_bucket} N={self.n} K={self.k}{groups}"


def m_bucket(m: int) -> int:
    """The bucket edge of `m` (>= 1): the smallest of 1, 2, 3, 4, 6, 8, 12, ... that is >= m."""
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        raise ValueError(f"m_bucket: m must be a positive int; got {m!r}")
    power = 1 << (m - 1).bit_length()         # the next power of two >= m
    between = power * 3 // 4
    return between if power >= 4 and m <= between else power


def shape_class(kind: str, m: int, n: int, k: int, num_groups: int, num_sms: int,
                arch: str) -> ShapeClass:
    return ShapeClass(kind, n, k, num_groups, m_bucket(m), arch, num_sms)


def representative_m(cls: ShapeClass) -> int:
    """The `m` the class is timed at (what `heuristics.select` would be asked with)."""
    if cls.kind == "m_grouped_fp8_gemm_nt_contiguous":
        return align(cls.m_bucket, _CONTIGUOUS_BLOCK)
    return cls.m_bucket


def contiguous_rows(cls: ShapeClass) -> list:
    """Rows of each group in the representative contiguous problem: its 128-row blocks dealt
    out over the groups as evenly as they go (some groups get none when blocks are fewer)."""
    blocks = representative_m(cls) // _CONTIGUOUS_BLOCK
    base, extra = divmod(blocks, cls.num_groups)
    return [(base + (g < extra)) * _CONTIGUOUS_BLOCK for g in range(cls.num_groups)]


# The masked layout's expected_m is a hint: the real rows of each group vary around it (and
# with them the wave count of every tile), so a masked class is timed on MASKED_DRAWS problems
# whose rows per group spread over 0.7..1.3 x the edge, and each candidate's times are summed.
# The groups x draws values are the midpoints of as many equal strata of that spread (mean:
# the edge); draw d takes the d-th run of them, from the lightest load to the heaviest, so
# that a tile which needs one more wave at some load loses on that draw, which the tuner
# does not accept from a replacement of the heuristic's pick (tuner._best).
# NOTES (session 34): drawn at random from fixed seeds (n4), the values were the same for
# every class and averaged 1.17 x the edge at one group (1.14 at two, 1.10 at four); with
# each draw holding one group of each run (n5, n6) every draw had the same load, and a tile
# one wave longer at high load won all four (128x160 over 192x128 at 4 x 256, 4096x7168,
# then 1.29x slower on the benchmark's rows, all above 256).
MASKED_DRAWS = 4
MASKED_SPREAD = (0.7, 1.3)


def masked_rows(cls: ShapeClass, draw: int = 0) -> list:
    """masked_m of each group in representative masked problem number `draw`."""
    low, high = MASKED_SPREAD
    strata = cls.num_groups * MASKED_DRAWS
    return [max(1, round(cls.m_bucket * (low + (high - low) * (
                draw * cls.num_groups + g + 0.5) / strata)))
            for g in range(cls.num_groups)]


def masked_max_m(cls: ShapeClass) -> int:
    return align(max(max(masked_rows(cls, draw)) for draw in range(MASKED_DRAWS)), 64)


def candidates(cls: ShapeClass, top_k: int) -> list:
    """The cost model's `top_k` best specs for the class, best (the heuristic's pick) first,
    and the K-split pair it cannot rank where one fits (heuristics.candidates)."""
    return heuristics.candidates(cls.kind, representative_m(cls), cls.n, cls.k,
                                 cls.num_groups, cls.num_sms, count=top_k)


def decision_fields(cls: ShapeClass, candidate_specs: list, csrc_digest: str,
                    compiler_identity: str, compiler_flags: tuple) -> dict:
    """What a decision for `cls` is keyed on (`dgemm.jit.decisions.decision_key`)."""
    return {"what": "dgemm.autotune kernel choice", "method": TIMING_METHOD,
            "class": dataclasses.asdict(cls),
            "candidates": [json.loads(spec.to_json()) for spec in candidate_specs],
            "csrc": csrc_digest, "compiler": compiler_identity,
            "flags": list(compiler_flags)}


__all__ = ["ShapeClass", "m_bucket", "shape_class", "representative_m", "contiguous_rows",
           "masked_rows", "masked_max_m", "MASKED_DRAWS", "TIMING_METHOD", "candidates",
           "decision_fields"]
