"""The gc job on a real disk tier. Entries are packed from made-up cubin bytes: cleanup verifies
and removes files, it never loads or compiles them, so no compiler runs here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dgemm.heuristics import select
from dgemm.jit import entry as entry_format
from dgemm.jit.tiers import DiskTier
from dgemm.jobs import cleanup

HOUR = 3600.0
CUBIN_BYTES = 4096


@pytest.fixture
def disk(tmp_path, monkeypatch) -> DiskTier:
    for name in ("DGEMM_CACHE_SECRET", "DGEMM_CACHE_SECRET_FILE", "DGEMM_REMOTE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "cache"))
    return DiskTier(tmp_path / "cache")


@pytest.fixture(scope="module")
def this_compiler() -> str:
    identity = cleanup._current_compiler()
    assert not identity.startswith("?"), f"the default compiler is unavailable: {identity}"
    return identity


def put_entry(disk: DiskTier, n: int, compiler: str, hours_unused: float = 0.0) -> Path:
    """Publish a well-formed entry (distinct per n) last used `hours_unused` hours ago."""
    spec = select("fp8_gemm_nt", 128, 256 * n, 512)
    key = f"{n:064x}"
    blob = entry_format.pack(entry_format.Entry(
        key=key, spec=entry_format.canonical_spec(spec), compiler=compiler,
        flags=("--gpu-architecture=sm_90a",),
        symbol="_Z6kernelv", cubin=bytes([n % 256]) * CUBIN_BYTES, created=time.time(),
        compile_seconds=1.0))
    disk.put_blob(key, blob)
    path = disk.entry_path(key)
    age(path, hours_unused)
    return path


def age(path: Path, hours: float) -> None:
    stamp = time.time() - hours * HOUR
    os.utime(path, (stamp, stamp))


@pytest.fixture
def run_gc(capsys):
    def run(*argv: str) -> tuple[int, dict]:
        defaults = {"--max-bytes": "none", "--max-age": "none"}
        for flag, value in defaults.items():
            if flag not in argv:
                argv += (flag, value)
        code = cleanup.main([*argv, "--json"])
        return code, json.loads(capsys.readouterr().out)
    return run


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait(timeout=60)
    return finished.pid


def temp_name(n: int, pid: int) -> str:
    """A temp file name as DiskTier.put_blob makes it: <key>.<pid>.<8 hex>.tmp."""
    return f"{n:064x}.{pid}.{n:08x}.tmp"


def tree(root: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


# ------------------------------------------------------------------------------------------------
def test_lru_eviction_removes_the_least_recently_used_entries_first(disk, this_compiler, run_gc):
    paths = [put_entry(disk, n, this_compiler, hours_unused=10 - n) for n in range(1, 5)]
    budget = 2 * paths[0].stat().st_size + 10
    code, report = run_gc("--max-bytes", str(budget))
    assert code == 0
    assert [p.exists() for p in paths] == [False, False, True, True]
    assert report["removed"]["evicted"] == 2 and report["bytes_after"] <= budget


def test_entries_unused_past_max_age_are_removed(disk, this_compiler, run_gc):
    stale = put_entry(disk, 1, this_compiler, hours_unused=49)
    fresh = put_entry(disk, 2, this_compiler, hours_unused=47)
    code, report = run_gc("--max-age", "2d")
    assert code == 0
    assert (stale.exists(), fresh.exists()) == (False, True)
    assert report["removed"]["expired"] == 1


def test_a_corrupt_entry_is_removed_and_a_valid_one_kept(disk, this_compiler, run_gc):
    corrupt = put_entry(disk, 1, this_compiler)
    valid = put_entry(disk, 2, this_compiler)
    blob = bytearray(corrupt.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    corrupt.write_bytes(bytes(blob))
    code, report = run_gc()
    assert code == 0
    assert (corrupt.exists(), valid.exists()) == (False, True)
    assert report["removed"]["corrupt"] == 1
    assert "checksum" in report["actions"][-1]["detail"]


def test_old_temp_files_of_dead_writers_are_removed_and_recent_ones_kept(disk, this_compiler,
                                                                        run_gc):
    put_entry(disk, 1, this_compiler)
    pid = dead_pid()
    old, recent = disk.tmp_dir / temp_name(1, pid), disk.tmp_dir / temp_name(2, pid)
    old.write_bytes(b"partial")
    recent.write_bytes(b"in flight")
    age(old, 2)
    code, report = run_gc("--stale-after", "1h")
    assert code == 0
    assert (old.exists(), recent.exists()) == (False, True)
    assert report["removed"]["temp_file"] == 1


def test_old_lock_files_that_no_one_holds_are_removed(disk, this_compiler, run_gc):
    entry = put_entry(disk, 1, this_compiler)
    dead = disk.lock_path("f" * 64)
    dead.write_bytes(b"")
    age(dead, 2)
    code, report = run_gc()
    assert code == 0
    assert not dead.exists() and entry.exists()
    assert report["removed"]["dead_lock"] == 1


def test_entries_of_other_compiler_versions_are_removed(disk, this_compiler, run_gc):
    mine = put_entry(disk, 1, this_compiler)
    other = put_entry(disk, 2, "nvrtc 0.1")
    code, report = run_gc()
    assert code == 0
    assert (mine.exists(), other.exists()) == (True, False)
    assert report["removed"]["other_compiler"] == 1


def test_keep_other_compilers_keeps_their_entries(disk, this_compiler, run_gc):
    other = put_entry(disk, 2, "nvrtc 0.1")
    code, report = run_gc("--keep-other-compilers")
    assert code == 0 and other.exists()
    assert report["removed"]["other_compiler"] == 0


def test_dry_run_reports_removals_but_changes_nothing(disk, this_compiler, run_gc):
    for n in range(1, 4):
        put_entry(disk, n, this_compiler, hours_unused=n)
    put_entry(disk, 4, "nvcc 0.1")
    stale_tmp = disk.tmp_dir / temp_name(5, dead_pid())
    stale_tmp.write_bytes(b"partial")
    age(stale_tmp, 5)
    before = tree(disk.root)
    code, report = run_gc("--dry-run", "--max-bytes", "1", "--max-age", "2h")
    assert code == 0
    assert tree(disk.root) == before
    assert report["removed"] == {"temp_file": 1, "dead_lock": 0, "corrupt": 0,
                                 "other_compiler": 1, "expired": 2, "evicted": 1}


def test_an_entry_whose_lock_is_held_is_not_removed(disk, this_compiler, run_gc):
    held = put_entry(disk, 1, this_compiler, hours_unused=100)
    free = put_entry(disk, 2, this_compiler, hours_unused=100)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import filelock, sys, time\n"
         "lock = filelock.FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True)\n"
         "time.sleep(60)", str(disk.lock_path(f"{1:064x}"))],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, report = run_gc("--max-age", "1h")
    finally:
        holder.kill()
        holder.wait()
    assert code == 0
    assert (held.exists(), free.exists()) == (True, False)
    assert report["skipped_locked"] == [str(held)]


def test_with_a_secret_set_unsigned_entries_are_removed_as_corrupt(
        disk, this_compiler, run_gc, monkeypatch):
    unsigned = put_entry(disk, 1, this_compiler)
    monkeypatch.setenv("DGEMM_CACHE_SECRET", "s3cret")
    code, report = run_gc()
    assert code == 0 and not unsigned.exists()
    assert "unsigned" in report["actions"][0]["detail"]


def test_a_cache_dir_that_does_not_exist_yet_is_cleaned_without_error(disk, run_gc):
    code, report = run_gc()
    assert code == 0
    assert (report["entries_before"], report["errors"]) == (0, [])
    assert not disk.root.exists()
