"""What the CLI tests share: running `dgemm-cache` in process, the cache fixtures they take,
the process table (for tests about workers left behind) and a tampered bundle."""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from dgemm import cli
from dgemm.jit.tiers import DiskTier


def run_cli(capsys, *argv) -> tuple:
    """(exit status, stdout, stderr) of `dgemm-cache argv...` in this process; argparse's own
    refusals (SystemExit) count as their exit status, any other exception fails the test."""
    try:
        status = cli.main([str(arg) for arg in argv])
    except SystemExit as exited:
        status = exited.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_cli_json(capsys, *argv) -> tuple:
    """(exit status, the parsed --json report) of `dgemm-cache argv... --json`."""
    status, out, _ = run_cli(capsys, *argv, "--json")
    return status, json.loads(out)


@pytest.fixture
def disk(fresh_dgemm_cache):
    return DiskTier(fresh_dgemm_cache)


@pytest.fixture
def remote(redis_server, monkeypatch):
    """The test's redis-server as DGEMM_REMOTE_CACHE, with a short timeout."""
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.5")
    return redis_server


def process_table() -> dict:
    """pid -> (ppid, state) of every process, from /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                text = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            table[int(name)] = (int(fields[1]), fields[0])
    return table


def live_children(pid: int) -> set:
    """The children of `pid` that are not zombies."""
    return {child for child, (parent, state) in process_table().items()
            if parent == pid and state != "Z"}


def tampered_bundle(source: Path, target: Path, key: str) -> None:
    """A copy of bundle `source` at `target` with one bit of `key`'s entry flipped."""
    with tarfile.open(source) as original, tarfile.open(target, "w") as tampered:
        for member in original.getmembers():
            data = original.extractfile(member).read()
            if member.name == f"entries/{key}.kbin":
                data = data[:-1] + bytes([data[-1] ^ 1])
            tampered.addfile(member, io.BytesIO(data))
