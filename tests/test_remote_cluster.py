"""End to end through dgemm.jit.ensure_compiled: simulated nodes (separate DGEMM_CACHE_DIRs)
and ranks (forked processes) sharing one real redis-server.

The 4x4 cold start compiles the real csrc kernels with NVRTC; the failure-injection tests use
the trivial test kernels (tests/data/csrc) so their timing is dominated by the protocol."""
from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

import dgemm.jit
from dgemm.heuristics import select
from dgemm.jit import compiler, entry, key as key_module, remote
from dgemm.jit.tiers import DiskTier
from redis_server import redis_server  # noqa: F401

FORK = multiprocessing.get_context("fork")
LEASE_TTL_S = 1.5
TIMEOUT_S = 0.5


def ten_specs() -> list:
    specs = [select("fp8_gemm_nt", 128, n, 7168) for n in range(512, 512 + 10 * 256, 256)]
    assert len(set(specs)) == 10
    return specs


def key_of(spec) -> str:
    return key_module.key(spec, compiler.get_compiler())


@pytest.fixture
def cluster_env(redis_server, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", str(TIMEOUT_S))
    monkeypatch.setenv("DGEMM_REMOTE_LEASE_TTL", str(LEASE_TTL_S))
    monkeypatch.setenv("DGEMM_REMOTE_COOLDOWN", "0.3")
    return redis_server


# --- a rank: one forked process ------------------------------------------------------------------
def _start_rank(node_dir: Path, target, *args, extra_env: dict = None):
    results = FORK.Queue()
    process = FORK.Process(target=_rank_main, args=(str(node_dir), extra_env or {}, results,
                                                    target, args))
    process.start()
    return process, results


def _rank_main(node_dir, extra_env, results, target, args):
    os.environ["DGEMM_CACHE_DIR"] = node_dir
    os.environ.update(extra_env)
    dgemm.jit.state.reset()     # a fork must not reuse the parent's tiers or breaker
    try:
        results.put(("ok", target(*args)))
    except BaseException as error:                 # report, so the test shows the cause
        results.put(("error", repr(error)))


def _join(process, results, timeout_s: float = 60):
    status, value = results.get(timeout=timeout_s)
    process.join(timeout=10)
    assert status == "ok", value
    return value


def _compile_all(specs, barrier=None, seed=0):
    if barrier is not None:
        barrier.wait(timeout=30)
    order = list(specs)
    random.Random(seed).shuffle(order)
    slowest = 0.0
    for spec in order:
        started = time.monotonic()
        dgemm.jit.ensure_compiled(spec)
        slowest = max(slowest, time.monotonic() - started)
    return {"stats": dgemm.jit.stats(), "verified": _verified_on_disk(specs),
            "slowest": slowest}


def _verified_on_disk(specs) -> int:
    disk = DiskTier(dgemm.jit.env.cache_dir(), dgemm.jit.env.cache_secret())
    return sum(disk.get(key_of(spec)) is not None for spec in specs)     # get verifies


# --- the cold start ------------------------------------------------------------------------------
def test_sixteen_ranks_on_four_nodes_compile_each_of_ten_real_kernels_exactly_once(
        cluster_env, tmp_path):
    specs, nodes, ranks_per_node = ten_specs(), 4, 4
    barrier = FORK.Barrier(nodes * ranks_per_node)
    ranks = [_start_rank(tmp_path / f"node{n}", _compile_all, specs, barrier, n * 10 + r)
             for n in range(nodes) for r in range(ranks_per_node)]
    reports = [_join(*rank, timeout_s=120) for rank in ranks]
    assert sum(r["stats"]["compiles"] for r in reports) == 10
    assert all(r["verified"] == 10 for r in reports)
    assert sum(r["stats"]["remote_errors"] for r in reports) == 0
    assert cluster_env.client().zcard("dgemm:index") == 10


# --- the compiling process dies ------------------------------------------------------------------
def test_a_waiter_takes_over_when_the_compiling_process_is_killed(cluster_env, tmp_path,
                                                                   test_kernels):
    spec = ten_specs()[0]
    marker = tmp_path / "compiling.pid"
    owner = _start_rank(tmp_path / "node0", _compile_all, [spec],
                        extra_env={"DGEMM_TEST_PAUSE": "compile:60",
                                   "DGEMM_TEST_PAUSE_MARKER": str(marker)})
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "the owner never reached its compile"
    time.sleep(LEASE_TTL_S)      # long enough that the owner has renewed its lease
    # A waiter on another node (blocked on the cluster lease) and one on the owner's node
    # (blocked on the node's file lock).
    waiters = [_start_rank(tmp_path / "node1", _compile_all, [spec]),
               _start_rank(tmp_path / "node0", _compile_all, [spec])]
    time.sleep(0.5)
    os.kill(int(marker.read_text()), signal.SIGKILL)
    reports = [_join(*waiter) for waiter in waiters]
    owner[0].join(timeout=10)
    assert all(r["verified"] == 1 for r in reports)
    assert sum(r["stats"]["compiles"] for r in reports) == 1
    compile_s = max(r["stats"]["compile_seconds"] for r in reports)
    # The waiters took over when the dead owner's lease expired, not after DGEMM_REMOTE_WAIT
    # (300 s by default): generous slack for a loaded machine, far below that fallback.
    assert max(r["slowest"] for r in reports) < 0.5 + LEASE_TTL_S + compile_s + 20


# --- Redis dies or freezes mid-run ---------------------------------------------------------------
def _compile_through_an_outage(first, second, outage_over, barrier):
    during = _compile_all(first, barrier)
    barrier.wait(timeout=60)            # everyone is done with the outage phase
    outage_over.wait(timeout=60)
    time.sleep(0.4)                     # past the breaker's cool-down
    after = _compile_all(second)
    cache = remote.from_env().cache       # the tier the walk used (one per settings)
    return {"during": during, "after": after, "breaker": cache.breaker.state,
            "pending": cache.pending_uploads}


@pytest.mark.parametrize("outage", ["killed", "paused"])
def test_a_redis_outage_mid_run_falls_back_to_local_compiles_and_recovers(
        cluster_env, tmp_path, test_kernels, outage):
    nodes, ranks_per_node = 3, 2
    specs = [select("fp8_gemm_nt", 128, n, 7168) for n in range(256, 256 + 18 * 128, 128)]
    # After the outage every rank also asks for a kernel of its own, so every process talks to
    # Redis again (and so closes its breaker and flushes its deferred uploads).
    first, shared, own = specs[:10], specs[10:12], specs[12:]
    barrier, outage_over = FORK.Barrier(nodes * ranks_per_node + 1), FORK.Event()
    # Slow compiles, so that the outage starts while nodes compile and wait on each other.
    ranks = [_start_rank(tmp_path / f"node{n}", _compile_through_an_outage, first,
                         shared + [own[n * ranks_per_node + r]], outage_over, barrier,
                         extra_env={"DGEMM_TEST_PAUSE": "compile:0.15"})
             for n in range(nodes) for r in range(ranks_per_node)]
    barrier.wait(timeout=60)
    time.sleep(0.4)
    cluster_env.pause() if outage == "paused" else cluster_env.kill()
    barrier.wait(timeout=60)
    cluster_env.resume() if outage == "paused" else cluster_env.start()
    outage_over.set()
    reports = [_join(*rank) for rank in ranks]
    # The outage really hit the run: processes saw Redis fail.
    assert sum(r["during"]["stats"]["remote_errors"] for r in reports) > 0

    bound = LEASE_TTL_S / 3 + 2 * TIMEOUT_S + 0.15
    for report in reports:
        assert report["during"]["verified"] == len(first)
        assert report["after"]["verified"] == len(shared) + 1
        # A call may queue behind the node's own compile (file lock) and then pay its own
        # Redis timeout once: never more than two bounded waits.
        assert report["during"]["slowest"] < 2 * bound + 0.5, report
        assert report["breaker"] == "closed" and report["pending"] == 0
    client = cluster_env.client()
    assert all(client.exists("dgemm:entry:" + key_of(spec)) for spec in shared + own)
    if outage == "paused":
        # Redis kept what it had, and what was built during the outage was uploaded when it
        # answered again: the whole first phase is there. (A killed Redis restarts empty.)
        assert all(client.exists("dgemm:entry:" + key_of(spec)) for spec in first)


# --- bad remote values ---------------------------------------------------------------------------
def _flip_a_bit(blob):
    return blob[:100] + bytes([blob[100] ^ 1]) + blob[101:]


def _signed_for_another_key(blob):
    return entry.pack(_entry_with_key(blob, "ee" * 32))


def _entry_with_key(blob, key):
    import dataclasses
    original = entry.unpack(blob, entry.read_header(blob)["key"])
    return dataclasses.replace(original, key=key)


@pytest.mark.parametrize("damage", [_flip_a_bit, lambda blob: blob[:-9], _signed_for_another_key,
                                    "unsigned-with-secret"],
                         ids=["bit-flip", "truncated", "wrong-key", "unsigned-with-secret"])
def test_a_bad_remote_value_is_refused_recompiled_and_never_reaches_disk(
        cluster_env, test_kernels, fresh_dgemm_cache, monkeypatch, damage):
    spec = ten_specs()[0]
    key = key_of(spec)
    # A real blob to damage, compiled into a throwaway cache without the remote tier.
    monkeypatch.delenv("DGEMM_REMOTE_CACHE")
    good = dgemm.jit.get_entry(spec)
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", cluster_env.url)
    blob = entry.pack(good)
    bad = blob if damage == "unsigned-with-secret" else damage(blob)
    if damage == "unsigned-with-secret":
        monkeypatch.setenv("DGEMM_CACHE_SECRET", "s3cret")
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(fresh_dgemm_cache.parent / "fresh-node"))
    dgemm.jit.state.reset()
    client = cluster_env.client()
    client.set("dgemm:entry:" + key, bad)

    dgemm.jit.ensure_compiled(spec)

    stats = dgemm.jit.stats()
    assert stats["compiles"] == 1 and stats["remote_hits"] == 0
    secret = dgemm.jit.env.cache_secret()
    on_disk = DiskTier(dgemm.jit.env.cache_dir(), secret).entry_path(key).read_bytes()
    assert entry.unpack(on_disk, key, secret).cubin == good.cubin
    entry.unpack(client.get("dgemm:entry:" + key), key, secret)   # replaced by a good one
