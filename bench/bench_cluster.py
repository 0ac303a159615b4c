"""Cluster cold start: N ranks over M nodes ask for the same kernels at once, against one
redis-server. Prints compiles per unique kernel (must be 1), wall time against one compile,
and the Redis traffic per rank.

Nodes are separate DGEMM_CACHE_DIRs; ranks are processes forked after `import dgemm` (64
interpreters importing torch would measure the import, not the cache), each with its own
counters, remote tier and circuit breaker. Everything runs on this machine, so with fewer
cores than nodes the compiles of different kernels queue for CPU.

    python bench/bench_cluster.py                      # 64 ranks over 8 nodes, 16 kernels
    python bench/bench_cluster.py --compile-delay 2    # model a slow (NVCC-like) compile
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import dgemm.jit  # noqa: E402
from dgemm.heuristics import select  # noqa: E402
from dgemm.jit import compiler, remote  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

FORK = multiprocessing.get_context("fork")


def unique_specs(count: int) -> list:
    """`count` distinct dense-GEMM kernels (N varies; K = 7168 as in DeepSeek-V3)."""
    return [select("fp8_gemm_nt", 128, 512 + 256 * i, 7168) for i in range(count)]


def rank_main(node_dir: str, url: str, specs: list, seed: int, delay: float, barrier, results):
    os.environ.update(DGEMM_CACHE_DIR=node_dir, DGEMM_REMOTE_CACHE=url)
    if delay:
        os.environ["DGEMM_TEST_PAUSE"] = f"compile:{delay}"
    dgemm.jit.state.reset()             # the parent's tiers (and memory) must not be shared
    order = list(specs)
    random.Random(seed).shuffle(order)
    barrier.wait()
    started = time.perf_counter()
    for spec in order:
        dgemm.jit.ensure_compiled(spec)
    finished = time.perf_counter()     # CLOCK_MONOTONIC: comparable across processes
    tier = remote.from_env()            # the tier the walk used (one per settings)
    results.put(dict(dgemm.jit.stats(), started=started, finished=finished,
                     wall=finished - started, redis_calls=tier.cache.calls))


def one_compile_seconds(specs: list, delay: float) -> float:
    """Mean time of a plain local compile (no remote tier), in a throwaway cache."""
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["DGEMM_CACHE_DIR"] = scratch
        os.environ.pop("DGEMM_REMOTE_CACHE", None)
        if delay:
            os.environ["DGEMM_TEST_PAUSE"] = f"compile:{delay}"
        dgemm.jit.reset_stats()
        started = time.perf_counter()
        for spec in specs[:3]:
            dgemm.jit.ensure_compiled(spec)
        seconds = (time.perf_counter() - started) / min(3, len(specs))
        os.environ.pop("DGEMM_TEST_PAUSE", None)
        dgemm.jit.state.reset()
        return seconds


def server_counters(server: RedisServer) -> dict:
    info = server.client().info("stats")
    return {name: info[name] for name in ("total_commands_processed", "total_net_input_bytes",
                                          "total_net_output_bytes", "total_connections_received")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--ranks-per-node", type=int, default=8)
    parser.add_argument("--kernels", type=int, default=16, help="unique kernels (default 16)")
    parser.add_argument("--compile-delay", type=float, default=0.0, metavar="S",
                        help="add S seconds to every compile (DGEMM_TEST_PAUSE), to model a "
                             "slower compiler")
    parser.add_argument("--csrc", default=None, help="DGEMM_CSRC_DIR to compile instead of "
                                                     "the packaged kernels")
    args = parser.parse_args()
    if args.csrc:
        os.environ["DGEMM_CSRC_DIR"] = args.csrc
    specs = unique_specs(args.kernels)
    ranks = args.nodes * args.ranks_per_node
    single = one_compile_seconds(specs, args.compile_delay)

    with tempfile.TemporaryDirectory() as scratch:
        server = RedisServer(Path(scratch) / "redis").start()
        try:
            before = server_counters(server)
            barrier, results = FORK.Barrier(ranks + 1), FORK.Queue()
            processes = [FORK.Process(target=rank_main, args=(
                str(Path(scratch) / f"node{node}"), server.url, specs, node * 1000 + rank,
                args.compile_delay, barrier, results))
                for node in range(args.nodes) for rank in range(args.ranks_per_node)]
            for process in processes:
                process.start()
            barrier.wait()
            reports = [results.get(timeout=600) for _ in processes]
            for process in processes:
                process.join()
            after = server_counters(server)
        finally:
            server.stop()

    wall = max(r["finished"] for r in reports) - min(r["started"] for r in reports)
    compiles = sum(r["compiles"] for r in reports)
    delta = {name: after[name] - before[name] for name in after}
    calls = [r["redis_calls"] for r in reports]
    print(f"bench_cluster: {ranks} ranks over {args.nodes} nodes, {len(specs)} unique kernels, "
          f"{compiler.get_compiler().identity}, {os.cpu_count()} CPU cores, local redis-server")
    rows = [
        ("compiles per unique kernel", f"{compiles / len(specs):.2f}",
         f"{compiles} compiles for {len(specs)} kernels (must be 1.00)"),
        ("one compile (local, no Redis)", f"{single:.3f} s",
         f"+ {args.compile_delay:g} s added delay" if args.compile_delay else "real NVRTC"),
        ("cold start wall time", f"{wall:.3f} s",
         f"{wall / single:.1f} x one compile; {wall / (single * len(specs)):.2f} x compiling "
         f"all {len(specs)} once"),
        ("slowest rank", f"{max(r['wall'] for r in reports):.3f} s",
         f"median {statistics.median(r['wall'] for r in reports):.3f} s"),
        ("hits summed (memory/disk/remote)",
         f"{sum(r['memory_hits'] for r in reports)}/{sum(r['disk_hits'] for r in reports)}/"
         f"{sum(r['remote_hits'] for r in reports)}",
         f"waits {sum(r['waits'] for r in reports)}, remote errors "
         f"{sum(r['remote_errors'] for r in reports)}"),
        ("Redis round trips per rank", f"{statistics.mean(calls):.1f}",
         f"max {max(calls)} (the node's lock holder); server counted "
         f"{delta['total_commands_processed'] / ranks:.1f} commands/rank including those "
         f"inside Lua scripts; {delta['total_connections_received']} connections"),
        ("Redis bytes per rank (in/out)",
         f"{delta['total_net_input_bytes'] / ranks / 1024:.1f} / "
         f"{delta['total_net_output_bytes'] / ranks / 1024:.1f} KiB",
         "server-side network totals / ranks"),
    ]
    width = max(len(name) for name, _, _ in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}   {note}")
    return 0 if compiles == len(specs) else 1


if __name__ == "__main__":
    sys.exit(main())
