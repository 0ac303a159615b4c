"""`KernelSpec`: everything compiled into one kernel, naming the family that builds it.

A spec is a frozen, hashable dataclass whose canonical JSON enters the cache key. Its `kernel`
field names its family (`dgemm.kernels.family(spec.kernel)`), and every fact that depends on the
family's CUDA header (template arguments, threads, shared memory, the launch) is asked of that
family module, never computed here. `M` is a run-time argument, so one spec serves many M.

The JIT (`dgemm.jit`) knows nothing of GEMMs; it needs of a spec only `to_json()`, `arch`,
`header`, `cpp_instance()` and `plan_checks()` (the C++ that checks Python's plan against the
header at compile time).
"""
from __future__ import annotations

import dataclasses
import json
from typing import ClassVar

FORMAT_VERSION = 1                 # bump when the meaning of a spec field changes


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """Everything that is compiled into one kernel. Hashable; `to_json()` is canonical."""
    kernel: str                # the family: "fp8_gemm" (sm_90a) or "fp8_gemm_portable" (sm_80+)
    gemm_type: str             # "normal" | "grouped_contiguous" | "grouped_masked"
    n: int
    k: int
    num_groups: int
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_tma_multicast: int     # CTAs per cluster sharing one TMA load (1 = no multicast)
    multicast_on_a: bool       # with multicast: True shares A tiles (same m-block, adjacent
                               # n-blocks), False shares B (same n-block; plain GEMM only)
    num_sms: int               # persistent grid size (0 for the non-persistent portable kernel)
    arch: str                  # "sm_90a", "sm_80", ...
    k_split: int = 1           # CTAs of a cluster that split each tile's K blocks and add
                               # their partial sums (1 = none; sm_90a plain GEMM only)

    FORMAT_VERSION: ClassVar[int] = FORMAT_VERSION     # enters the cache key (dgemm.jit.key)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "KernelSpec":
        return cls(**json.loads(text))

    @property
    def family(self):
        """The module that owns this kernel (selection, plan, launch)."""
        from . import family
        return family(self.kernel)

    # --- what the JIT and the loader ask of a spec -------------------------------------------
    @property
    def header(self) -> str:
        return self.family.HEADER

    def cpp_instance(self) -> str:
        """The C++ template-id that the generated source instantiates."""
        return self.family.cpp_instance(self)

    def plan_checks(self) -> str:
        """C++ that makes the compile fail if Python's plan differs from the header's."""
        return self.family.plan_checks(self)

    @property
    def num_threads(self) -> int:
        return self.family.num_threads(self)

    @property
    def smem_bytes(self) -> int:
        return self.family.smem_bytes(self)

    @property
    def cluster_dim(self) -> int:
        """CTAs per cluster (1: an ordinary launch)."""
        return self.num_tma_multicast * self.k_split



def refuse_k_split(spec: KernelSpec) -> None:
    """ValueError for a K-split spec (`k_split` > 1) of a family that runs no K-split pairs
    (all but fp8_gemm): e.g. one read back from a hand-edited manifest, which would otherwise
    launch in clusters the kernel does not expect."""
    if spec.k_split != 1:
        raise ValueError(f"the {spec.kernel} kernel runs no K-split pairs; got k_split="
                         f"{spec.k_split!r}: use k_split=1")


# Enum names of `dgemm::GemmType` in csrc/dgemm/utils.cuh, by spec.gemm_type.
CPP_GEMM_TYPE = {
    "normal": "dgemm::GemmType::Normal",
    "grouped_contiguous": "dgemm::GemmType::GroupedContiguous",
    "grouped_masked": "dgemm::GemmType::GroupedMasked",
}


def cpp_bool(value: bool) -> str:
    return "true" if value else "false"
