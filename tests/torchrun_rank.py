"""One rank of the two-node torchrun job in tests/test_torchrun_two_nodes.py (run by torchrun,
never collected by pytest: the name does not start with test_).

    python -m torch.distributed.run --nnodes 2 --nproc-per-node 2 ... tests/torchrun_rank.py RESULT

Every rank walks the cache (`dgemm.jit.ensure_compiled_outcome`, no GPU) for the same SPECS,
twice: the first pass races the other ranks for every key, the second must be served from this
process's memory. The ranks then gather their outcomes and `dgemm.jit.stats()` over gloo, and
every rank checks the whole job: exactly one compile per kernel across the job, every other
rank served from disk or Redis. Rank 0 writes the gathered records to RESULT (JSON) so the test
can check them against Redis and both nodes' disks. Exit status 0 when the job's checks pass.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

import dgemm.jit
from dgemm.heuristics import select

FIRST_PASS_SOURCES = {"compiled", "disk", "remote"}


def job_specs() -> list:
    """Seven distinct kernels: both kernel families and all three GEMM kinds."""
    return [
        *(select("fp8_gemm_nt", 128, n, 7168) for n in (512, 1024, 2112, 4096)),
        select("m_grouped_fp8_gemm_nt_contiguous", 4096, 4096, 7168, num_groups=4),
        select("m_grouped_fp8_gemm_nt_masked", 256, 4096, 7168, num_groups=4),
        select("fp8_gemm_nt", 128, 4096, 7168, arch="sm_80"),
    ]


def walk_twice(specs: list, rank: int) -> dict:
    """key -> [first source, second source]. Each rank starts at a different spec, so at any
    moment some ranks compile while ranks of both nodes wait for the same keys."""
    order = specs[rank % len(specs):] + specs[:rank % len(specs)]
    sources = {}
    for _ in range(2):
        for spec in order:
            outcome = dgemm.jit.ensure_compiled_outcome(spec)
            sources.setdefault(outcome.key, []).append(outcome.source)
    return sources


def job_problems(records: list, compiles_all_reduced: int, expected_keys: int) -> list:
    """What is wrong with the job as a whole (empty when it did what the cache promises)."""
    problems = []
    keys = set(records[0]["sources"])
    if len(keys) != expected_keys:
        problems.append(f"{len(keys)} distinct keys for {expected_keys} specs")
    if any(set(record["sources"]) != keys for record in records):
        problems.append("ranks computed different keys for the same specs")
    compiles = sum(record["stats"]["compiles"] for record in records)
    if not compiles == compiles_all_reduced == len(keys):
        problems.append(f"{compiles} compiles by the stats ({compiles_all_reduced} all-reduced) "
                        f"for {len(keys)} kernels: want exactly one per kernel")
    for record in records:
        compiled_here = sum(first == "compiled" for first, _ in record["sources"].values())
        if compiled_here != record["stats"]["compiles"]:
            problems.append(f"rank {record['rank']}: {compiled_here} compiled outcomes but "
                            f"stats say {record['stats']['compiles']} compiles")
        if record["stats"]["remote_errors"]:
            problems.append(f"rank {record['rank']}: {record['stats']['remote_errors']} "
                            f"remote errors")
    for key in sorted(keys):
        problems += _key_problems(key, [record["sources"][key] for record in records])
    return problems


def _key_problems(key: str, sources: list) -> list:
    firsts = [first for first, _ in sources]
    problems = []
    if firsts.count("compiled") != 1:
        problems.append(f"{key[:12]}: compiled {firsts.count('compiled')} times ({firsts})")
    if not set(firsts) <= FIRST_PASS_SOURCES or "remote" not in firsts:
        problems.append(f"{key[:12]}: first sources {firsts}; the node that did not compile "
                        f"must have downloaded it from Redis")
    if any(second != "memory" for _, second in sources):
        problems.append(f"{key[:12]}: second sources {[s for _, s in sources]}, want memory")
    return problems


def main(result_path: str) -> int:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    specs = job_specs()
    dist.barrier()              # all ranks start walking together, so they really race
    record = {"rank": rank, "node": int(os.environ["GROUP_RANK"]),
              "cache_dir": os.environ["DGEMM_CACHE_DIR"],
              "sources": walk_twice(specs, rank), "stats": dgemm.jit.stats()}
    records = [None] * world
    dist.all_gather_object(records, record)
    compiles = torch.tensor([record["stats"]["compiles"]], dtype=torch.int64)
    dist.all_reduce(compiles)
    problems = job_problems(records, int(compiles.item()), len(specs))
    if rank == 0:
        with open(result_path, "w") as out:
            json.dump({"records": records, "problems": problems}, out, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    for problem in problems:
        print(f"rank {rank}: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
