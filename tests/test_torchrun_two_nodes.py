"""Two torchrun agents on loopback as two nodes: `--nnodes 2 --nproc-per-node 2`, a c10d
rendezvous on 127.0.0.1, a cache dir per node and one real redis-server as the remote tier.

- The cache walk (tests/torchrun_rank.py on every rank): the four ranks ask for the same seven
  kernels at once; the job gathers every rank's outcomes and stats over gloo and checks itself
  (exactly one compile per kernel across the job), then this test checks Redis and both disks.
- `torchrun scripts/prewarm.py`: RANK/WORLD_SIZE shard the manifest across the four ranks, so
  each kernel is compiled by one rank of one node only.

Real processes (torchrun launches its workers with `python`), CPU only, the trivial test kernels
(conftest's `test_kernels`) so compiles take milliseconds. Every job runs under a timeout; the
test is skipped only when this torch cannot run a gloo job at all.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed

import torchrun_rank
from redis_server import free_port, redis_server  # noqa: F401  (fixture: a real redis-server)

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "twonodes"
JOB_TIMEOUT_S = 120         # one whole job, both agents (~10 s): a hang fails, CI goes on
RENDEZVOUS_TIMEOUT_S = 60   # an agent whose peer never comes gives up by itself

# Variables of an enclosing torchrun (if pytest itself runs under one) must not leak into ours.
_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                       "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT")

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="this torch build has no torch.distributed with gloo, so torchrun cannot run a "
           "CPU job")


@pytest.fixture
def cluster(redis_server, test_kernels, tmp_path) -> dict:
    """The environment both agents share: test kernels, Redis in its own namespace."""
    environment = {name: value for name, value in os.environ.items()
                   if name not in _TORCHRUN_VARIABLES and not name.startswith("TORCHELASTIC_")}
    environment.update(
        DGEMM_REMOTE_CACHE=redis_server.url, DGEMM_REMOTE_NAMESPACE=NAMESPACE,
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return environment


def run_two_nodes(environment: dict, workdir: Path, script: str, *script_args: str) -> list:
    """Run `script` under two torchrun agents (nodes "node0" and "node1", each with its own
    DGEMM_CACHE_DIR under `workdir`) and return their cache dirs once both exited 0."""
    port = free_port()
    agents, node_dirs = [], []
    for node in range(2):
        node_dir = workdir / f"node{node}" / "dgemm-cache"
        node_dir.parent.mkdir(parents=True)
        node_dirs.append(node_dir)
        log = open(node_dir.parent / "torchrun.log", "w")
        command = [
            sys.executable, "-m", "torch.distributed.run",       # = torchrun, this interpreter
            "--nnodes", "2", "--nproc-per-node", "2",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", f"dgemm-two-nodes-{port}", "--local-addr", "127.0.0.1",
            # Node 0 hosts the rendezvous store (both agents are on this host, so say which).
            "--rdzv-conf", f"is_host={int(node == 0)},join_timeout={RENDEZVOUS_TIMEOUT_S}",
            "--max-restarts", "0", "--monitor-interval", "0.1",
            script, *script_args]
        agents.append((subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                        env=dict(environment, DGEMM_CACHE_DIR=str(node_dir))),
                       log))
    deadline = time.monotonic() + JOB_TIMEOUT_S
    codes = [_wait_or_kill(agent, log, deadline) for agent, log in agents]
    logs = "\n".join(f"--- node{node} ---\n{(d.parent / 'torchrun.log').read_text()[-6000:]}"
                     for node, d in enumerate(node_dirs))
    assert codes == [0, 0], f"torchrun agents exited {codes}:\n{logs}"
    return node_dirs


def _wait_or_kill(agent: subprocess.Popen, log, deadline: float) -> object:
    """The agent's exit code, or "timeout" after killing the agent and every process under it
    when the job overran its deadline. (torchrun starts each worker in a session of its own,
    so the agent's process group does not reach them: they are found through /proc.)"""
    try:
        return agent.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for pid in [*_descendants(agent.pid), agent.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        agent.wait(timeout=10)
        return "timeout"
    finally:
        log.close()


def _descendants(pid: int) -> list:
    """Every process under `pid`, children before grandchildren (Linux /proc)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue                        # the process ended while we looked
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def entry_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / "v1" / key[:2] / f"{key}.kbin"


def disk_keys(cache_dir: Path) -> set:
    return {path.stem for path in (cache_dir / "v1").glob("*/*.kbin")}


def remote_keys(server) -> set:
    prefix = f"{NAMESPACE}:entry:"
    return {name.decode()[len(prefix):] for name in server.client().scan_iter(prefix + "*")}


def test_two_nodes_compile_each_kernel_once_across_the_job(cluster, redis_server, tmp_path):
    result = tmp_path / "job.json"
    node_dirs = run_two_nodes(cluster, tmp_path, "tests/torchrun_rank.py", str(result))
    job = json.loads(result.read_text())
    records = job["records"]
    assert job["problems"] == []                            # the job's own check, over gloo

    assert sorted(record["rank"] for record in records) == [0, 1, 2, 3]
    ranks_per_dir = {d: sum(r["cache_dir"] == str(d) for r in records) for d in node_dirs}
    assert list(ranks_per_dir.values()) == [2, 2], ranks_per_dir
    assert {record["node"] for record in records} == {0, 1}
    keys = set(records[0]["sources"])
    assert len(keys) == len(torchrun_rank.job_specs())
    assert sum(record["stats"]["compiles"] for record in records) == len(keys)
    for key in keys:
        firsts = [record["sources"][key][0] for record in records]
        assert firsts.count("compiled") == 1, (key, firsts)
        assert set(firsts) <= {"compiled", "disk", "remote"}, (key, firsts)
    assert remote_keys(redis_server) == keys
    for node_dir in node_dirs:
        assert all(entry_path(node_dir, key).is_file() for key in keys), node_dir


# Six dense kernels (N and K are compile-time), so every one of the four ranks gets a share.
PREWARM_MANIFEST = {"dense": {"m": [128], "nk": [[n, 7168] for n in (512, 1024, 1536, 2048,
                                                                     2560, 3072)]}}


def test_torchrun_prewarm_shards_the_manifest_across_both_nodes(cluster, redis_server,
                                                                 tmp_path):
    from dgemm.jobs import manifest
    expected = len(manifest.specs_for(manifest.problems(PREWARM_MANIFEST), 132, "sm_90a"))
    assert expected >= 4
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(PREWARM_MANIFEST))

    node_dirs = run_two_nodes(cluster, tmp_path, "scripts/prewarm.py", "--manifest",
                              str(shapes), "--jobs", "1", "--no-progress")
    on_disk = [disk_keys(node_dir) for node_dir in node_dirs]
    # Each rank compiled only its shard and published it to its node's disk and to Redis: the
    # two disks are disjoint (no kernel compiled on both nodes), both did work, and Redis
    # holds every kernel of the manifest.
    assert on_disk[0] and on_disk[1]
    assert not on_disk[0] & on_disk[1]
    assert len(on_disk[0] | on_disk[1]) == expected
    assert remote_keys(redis_server) == on_disk[0] | on_disk[1]
