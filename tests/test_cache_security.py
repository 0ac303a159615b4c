"""Issue 15, the local cache's part: no planted, crafted, unreadable or unwritable thing in a
cache directory (or the secret file) may fail a call, hang a rank or run another user's cubin.

    1  directories or entries another user could write are not trusted
    2  a crafted entry is refused (digests first, bounded parsing) and rebuilt, in every tier
    3  a disk that cannot take a publish does not fail the call that has the kernel in hand
    5  reads are bounded: regular files only, never a FIFO, a device or a 4 GiB sparse file
    8  a stopped holder of a key's lock does not block a rank when disk or Redis has the kernel

Real files, a real redis-server, and subprocesses with timeouts where the defect was a hang.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import dgemm.jit
from dgemm.jit import entry as entry_format
from dgemm.jit import env, safe_files, tiers
from dgemm.jit.errors import CacheDirError, ConfigError, EntryError
from dgemm.jit.tiers import DiskTier
from redis_server import redis_server  # noqa: F401

AS_ROOT = os.geteuid() == 0
NOBODY = 65534
needs_root = pytest.mark.skipif(not AS_ROOT, reason="chown to another user needs root")
needs_non_root = pytest.mark.skipif(AS_ROOT, reason="root ignores permission bits")

WALK = ("from dgemm.heuristics import select\n"
        "import dgemm.jit\n"
        "spec = select('fp8_gemm_nt', 128, 4096, 7168)\n")
PRINT_SOURCES = ("print(json.dumps([dgemm.jit.ensure_compiled_outcome(spec).source\n"
                 "                  for _ in range(2)]))\n")


def _sources(result: subprocess.CompletedProcess) -> list:
    return json.loads(result.stdout.splitlines()[-1])


def _entry_path(cache_dir: Path, key: str) -> Path:
    return DiskTier(cache_dir).entry_path(key)


def _crafted(header: bytes, cubin: bytes = b"", secret: bytes = None, flags: int = None) -> bytes:
    """A blob of the v1 layout around raw `header` bytes, with correct digests: what anyone
    can make without the secret (or with a guessed one)."""
    flags = (1 if secret else 0) if flags is None else flags
    body = struct.pack("<8sHBxI", entry_format.MAGIC, 1, flags, len(header)) + header + cubin
    blob = body + hashlib.sha256(body).digest()
    return blob + hmac.new(secret, body, hashlib.sha256).digest() if secret else blob


def _planted(cache_dir: Path, key: str) -> bytes:
    """The entry at `key` with its cubin swapped for another user's, correctly checksummed."""
    real = entry_format.unpack(_entry_path(cache_dir, key).read_bytes(), key)
    return entry_format.pack(dataclasses.replace(real, cubin=b"\x7fELF planted by mallory"))


# --- 1: foreign-owned or shared directories and entries ---------------------------------------
@pytest.mark.parametrize("where", ["", "v1", "shard"])
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_a_kernel_planted_in_a_directory_others_can_write_is_not_run(
        warm_cache, spec, fresh_dgemm_cache, caplog, where, mode):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    path.write_bytes(_planted(fresh_dgemm_cache, warm_cache))
    directory = {"": fresh_dgemm_cache, "v1": fresh_dgemm_cache / "v1", "shard": path.parent}
    directory[where].chmod(mode)
    outcome = dgemm.jit.ensure_compiled_outcome(spec)
    assert outcome.source == "compiled" and b"mallory" not in outcome.entry.cubin
    assert "chmod 700" in caplog.text and "writable by group or others" in caplog.text
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "memory"


@needs_root
@pytest.mark.parametrize("where", ["", "v1", "shard"])
def test_a_kernel_in_a_directory_of_another_user_is_not_run(warm_cache, spec,
                                                            fresh_dgemm_cache, caplog, where):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    path.write_bytes(_planted(fresh_dgemm_cache, warm_cache))
    directory = {"": fresh_dgemm_cache, "v1": fresh_dgemm_cache / "v1", "shard": path.parent}
    os.chown(directory[where], NOBODY, NOBODY)
    outcome = dgemm.jit.ensure_compiled_outcome(spec)
    assert outcome.source == "compiled" and b"mallory" not in outcome.entry.cubin
    assert f"owned by uid {NOBODY}" in caplog.text


def test_the_untrusted_directory_warning_is_given_once(warm_cache, spec, fresh_dgemm_cache,
                                                       caplog):
    fresh_dgemm_cache.chmod(0o777)
    disk = DiskTier(fresh_dgemm_cache)
    assert disk.get(warm_cache) is None and disk.get(warm_cache) is None
    assert caplog.text.count("not using the disk cache") == 1


@pytest.mark.parametrize("part", ["locks", "tmp"])
def test_a_lock_or_temp_directory_others_can_write_is_not_used_and_the_call_is_served(
        test_kernels, spec, fresh_dgemm_cache, caplog, part):
    DiskTier(fresh_dgemm_cache).ensure_dirs()
    (fresh_dgemm_cache / part).chmod(0o777)
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "compiled"
    assert f"{part} is writable by group or others" in caplog.text
    assert not list((fresh_dgemm_cache / part).iterdir())      # nothing created in it


def _rebuilt_after(cache_dir: Path, key: str, spec) -> None:
    """The walk refuses the entry at `key`, compiles, and replaces it with its own file."""
    outcome = dgemm.jit.ensure_compiled_outcome(spec)
    assert outcome.source == "compiled" and b"mallory" not in outcome.entry.cubin
    path = _entry_path(cache_dir, key)
    found = os.lstat(path)
    assert stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid()
    assert not found.st_mode & 0o022


@needs_root
def test_an_entry_file_of_another_user_is_refused_removed_and_rebuilt(warm_cache, spec,
                                                                      fresh_dgemm_cache):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    path.write_bytes(_planted(fresh_dgemm_cache, warm_cache))
    os.chown(path, NOBODY, NOBODY)
    _rebuilt_after(fresh_dgemm_cache, warm_cache, spec)


def test_an_entry_file_others_can_write_is_refused_removed_and_rebuilt(warm_cache, spec,
                                                                       fresh_dgemm_cache):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    path.write_bytes(_planted(fresh_dgemm_cache, warm_cache))
    path.chmod(0o666)
    _rebuilt_after(fresh_dgemm_cache, warm_cache, spec)


def test_an_entry_that_is_a_symlink_is_not_followed(warm_cache, spec, fresh_dgemm_cache,
                                                    tmp_path):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    elsewhere = tmp_path / "mallory.kbin"
    elsewhere.write_bytes(_planted(fresh_dgemm_cache, warm_cache))
    path.unlink()
    path.symlink_to(elsewhere)
    _rebuilt_after(fresh_dgemm_cache, warm_cache, spec)
    assert elsewhere.exists()                   # the link was removed, not its target


@needs_root
def test_a_user_planting_into_a_world_writable_cache_cannot_get_its_cubin_run(
        warm_cache, spec, fresh_dgemm_cache, monkeypatch):
    """The probe's attack end to end: another user (a real process of uid 65534) writes a
    correctly checksummed entry under the victim's predictable key into the victim's
    world-writable cache (outside pytest's private temp dirs, so that user can reach it)."""
    if not os.stat(tempfile.gettempdir()).st_mode & stat.S_IXOTH:
        pytest.skip(f"{tempfile.gettempdir()} cannot be entered by other users")
    shared = Path(tempfile.mkdtemp(prefix="dgemm-shared-cache-"))
    try:
        shutil.copytree(fresh_dgemm_cache, shared, dirs_exist_ok=True)
        monkeypatch.setenv("DGEMM_CACHE_DIR", str(shared))
        path = _entry_path(shared, warm_cache)
        planted = _planted(shared, warm_cache)
        path.unlink()
        for directory in (shared, shared / "v1", path.parent):
            directory.chmod(0o777)
        _as_another_user(lambda: path.write_bytes(planted))
        assert os.stat(path).st_uid == NOBODY
        outcome = dgemm.jit.ensure_compiled_outcome(spec)
        assert outcome.source == "compiled" and b"mallory" not in outcome.entry.cubin
    finally:
        shutil.rmtree(shared)


def _as_another_user(action) -> None:
    """Run `action` in a forked child that has become uid/gid 65534 (nobody)."""
    child = os.fork()
    if child == 0:
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            action()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other user's action failed"


def test_check_private_dir_names_the_directory_and_the_fix(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    tiers.check_private_dir(shared)
    tiers.check_private_dir(tmp_path / "missing")       # nothing there to trust
    shared.chmod(0o757)
    with pytest.raises(CacheDirError) as raised:
        tiers.check_private_dir(shared)
    message = str(raised.value)
    assert str(shared) in message and "mode 0757" in message
    assert "chmod 700" in message and "DGEMM_CACHE_DIR" in message


@needs_root
def test_check_private_dir_refuses_a_directory_of_another_user(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(CacheDirError, match=f"owned by uid {NOBODY}.*chown"):
        tiers.check_private_dir(theirs)


@pytest.mark.parametrize("part", ["", "v1", "shard", "locks", "tmp"])
def test_check_private_covers_the_root_and_every_subdirectory(warm_cache, fresh_dgemm_cache,
                                                               part):
    disk = DiskTier(fresh_dgemm_cache)
    disk.ensure_dirs()
    disk.check_private()
    shard = disk.entry_path(warm_cache).parent
    (shard if part == "shard" else fresh_dgemm_cache / part).chmod(0o777)
    with pytest.raises(CacheDirError, match="writable by group or others"):
        disk.check_private()


def test_publishing_into_a_directory_others_can_write_is_a_clear_cache_dir_error(
        fresh_dgemm_cache):
    fresh_dgemm_cache.mkdir(mode=0o777)
    fresh_dgemm_cache.chmod(0o777)
    from redis_server import make_entry_blob
    with pytest.raises(CacheDirError, match="chmod 700"):
        DiskTier(fresh_dgemm_cache).put_blob("ab" * 32, make_entry_blob())


# --- 2: crafted entries -------------------------------------------------------------------------
DEEP = b"[" * 100_000


def test_a_deeply_nested_header_is_an_entry_error_not_a_recursion_error():
    with pytest.raises(EntryError, match="nests deeper"):
        entry_format.unpack(_crafted(DEEP), "ab" * 32)


def test_with_a_secret_the_hmac_is_checked_before_the_header_is_parsed():
    forged = _crafted(DEEP, secret=b"guessed")
    with pytest.raises(EntryError, match="HMAC"):
        entry_format.unpack(forged, "ab" * 32, b"team secret")
    with pytest.raises(EntryError, match="unsigned"):
        entry_format.unpack(_crafted(DEEP), "ab" * 32, b"team secret")


def test_the_checksum_is_checked_before_the_header_is_parsed():
    damaged = bytearray(_crafted(DEEP))
    damaged[-1] ^= 1
    with pytest.raises(EntryError, match="checksum"):
        entry_format.unpack(bytes(damaged), "ab" * 32)


def test_the_v1_layout_is_unchanged_digests_are_the_last_bytes():
    from redis_server import make_entry_blob
    unsigned, signed = make_entry_blob(), make_entry_blob(secret=b"s")
    assert unsigned[-32:] == hashlib.sha256(unsigned[:-32]).digest()
    assert signed[-64:-32] == hashlib.sha256(signed[:-64]).digest()
    assert signed[-32:] == hmac.new(b"s", signed[:-64], hashlib.sha256).digest()
    assert entry_format.unpack(signed, "ab" * 32, b"s").blob == signed


def _header(**changes) -> bytes:
    fields = {"key": "ab" * 32, "spec": {"arch": "sm_90a"}, "compiler": "nvrtc 13.0",
              "flags": ["-O3"], "symbol": "_Z1kv", "created": 1.0, "compile_seconds": 0.5,
              "cubin_sha256": hashlib.sha256(b"").hexdigest(), "size": 0}
    fields.update(changes)
    return json.dumps({k: v for k, v in fields.items() if v is not ...}).encode()


MALFORMED_HEADERS = {
    "deep list": DEEP,
    "deep object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "moderately deep spec": _header(spec=json.loads("[" * 500 + "]" * 500)),
    "spec is a list": _header(spec=["sm_90a"]),
    "spec is a string": _header(spec="sm_90a"),
    "compiler is a number": _header(compiler=13),
    "flags is a string": _header(flags="-O3"),
    "flags hold numbers": _header(flags=[1, 2]),
    "size is a bool": _header(size=True),
    "size is negative": _header(size=-1),
    "size is a float": _header(size=0.0),
    "created is a string": _header(created="yesterday"),
    "created is huge": _header(created=10 ** 400),
    "created is NaN": b'{"created": NaN}',
    "key is missing": _header(key=...),
    "not an object": b"[1, 2, 3]",
    "not UTF-8": b"\xff\xfe{}",
    "not JSON": b"{key: 1}",
    "huge integer": b'{"size": ' + b"9" * 5000 + b"}",
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(MALFORMED_HEADERS))
def test_a_malformed_header_raises_only_entry_error_everywhere(name):
    blob = _crafted(MALFORMED_HEADERS[name])
    for read in (lambda: entry_format.unpack(blob, "ab" * 32), lambda: entry_format.unpack(
            blob, "ab" * 32, b"s"), lambda: entry_format.read_header(blob),
                 lambda: entry_format.describe(blob)):
        with pytest.raises(EntryError):
            read()


def test_a_well_formed_crafted_header_still_unpacks():
    assert entry_format.unpack(_crafted(_header()), "ab" * 32).symbol == "_Z1kv"


def test_random_damage_to_a_blob_raises_only_entry_error():
    from redis_server import make_entry_blob
    rng = random.Random(15)
    good = make_entry_blob(secret=b"s")
    for trial in range(3000):
        blob = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(blob))
            choice = rng.random()
            if choice < 0.5:
                blob[position] = rng.randrange(256)
            elif choice < 0.75:
                del blob[position:position + rng.randint(1, 64)]
            else:
                blob[position:position] = rng.choice([b"[", b"{", b"\x00", b"9" * 40]) * 10
        for read in (lambda: entry_format.unpack(bytes(blob), "ab" * 32, b"s"),
                     lambda: entry_format.unpack(bytes(blob), "ab" * 32),
                     lambda: entry_format.describe(bytes(blob))):
            try:
                read()
            except EntryError:
                pass


def test_a_crafted_disk_entry_is_removed_and_rebuilt(warm_cache, spec, fresh_dgemm_cache):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    path.write_bytes(_crafted(DEEP))    # the probe's poison, checksummed
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "compiled"
    assert entry_format.unpack(path.read_bytes(), warm_cache).key == warm_cache


def test_a_crafted_redis_entry_is_refused_deleted_and_rebuilt_even_with_a_secret(
        precompiled_cache, test_kernels, spec, redis_server, monkeypatch):
    _, key = precompiled_cache
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("DGEMM_CACHE_SECRET", "team secret")
    client = redis_server.client()
    client.set(f"dgemm:entry:{key}", _crafted(DEEP, secret=b"team secret"[::-1]))
    outcome = dgemm.jit.ensure_compiled_outcome(spec)
    assert outcome.source == "compiled" and outcome.key == key
    stored = client.get(f"dgemm:entry:{key}")
    assert entry_format.unpack(stored, key, b"team secret").cubin == outcome.entry.cubin


# --- 3: a disk that cannot take the publish ----------------------------------------------------
DISK_FULL = ("import resource, signal\n"
             "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
             "resource.setrlimit(resource.RLIMIT_FSIZE, (256, resource.RLIM_INFINITY))\n")


def test_a_full_disk_does_not_fail_a_compiled_kernel(test_kernels, fresh_dgemm_cache,
                                                      python_subprocess):
    """RLIMIT_FSIZE makes every write past 256 bytes fail with EFBIG: a full disk."""
    result = python_subprocess(WALK + DISK_FULL + PRINT_SOURCES, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _sources(result) == ["compiled", "memory"]
    assert result.stderr.count("cannot write the disk cache") == 1
    assert not list(DiskTier(fresh_dgemm_cache).iter_entries())
    assert not list((fresh_dgemm_cache / "tmp").iterdir())      # no partial temp file left


def test_a_full_disk_does_not_fail_a_kernel_downloaded_from_redis(
        precompiled_cache, test_kernels, spec, redis_server, monkeypatch, python_subprocess):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    root, key = precompiled_cache
    redis_server.client().set(f"dgemm:entry:{key}", _entry_path(root, key).read_bytes())
    result = python_subprocess(WALK + DISK_FULL + PRINT_SOURCES, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _sources(result) == ["remote", "memory"]
    assert "cannot write the disk cache" in result.stderr


@pytest.mark.parametrize("blocked", ["tmp", "locks", "v1"])
def test_a_cache_subdirectory_that_cannot_be_made_does_not_fail_the_call(
        test_kernels, spec, fresh_dgemm_cache, caplog, blocked):
    fresh_dgemm_cache.mkdir(mode=0o700)
    (fresh_dgemm_cache / blocked).write_text("not a directory")
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "compiled"
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "memory"
    assert "cannot" in caplog.text and "DGEMM_CACHE_DIR" in caplog.text


def test_without_locks_the_kernel_is_still_published(test_kernels, spec, fresh_dgemm_cache,
                                                     caplog):
    fresh_dgemm_cache.mkdir(mode=0o700)
    (fresh_dgemm_cache / "locks").write_text("not a directory")
    key = dgemm.jit.ensure_compiled(spec)
    assert "without them" in caplog.text
    assert DiskTier(fresh_dgemm_cache).get(key) is not None


@needs_non_root
def test_a_read_only_cache_dir_serves_hits_and_compiles_misses_from_memory(
        warm_cache, spec, fresh_dgemm_cache, caplog):
    from dgemm.heuristics import select
    other = select("fp8_gemm_nt", 128, 2048, 7168)
    for directory in (fresh_dgemm_cache, *fresh_dgemm_cache.rglob("*")):
        if directory.is_dir():
            directory.chmod(0o500)
    try:
        assert dgemm.jit.ensure_compiled_outcome(spec).source == "disk"
        assert dgemm.jit.ensure_compiled_outcome(other).source == "compiled"
        assert "cannot write the disk cache" in caplog.text
    finally:
        for directory in (fresh_dgemm_cache, *fresh_dgemm_cache.rglob("*")):
            if directory.is_dir():
                directory.chmod(0o700)


# --- 5: bounded reads ---------------------------------------------------------------------------
# The walk in a subprocess whose address space may grow by at most 2 GiB, so that a regression
# that reads a device or a sparse file whole fails (MemoryError) instead of eating the host.
BOUNDED = ("import resource\n"
           "size = int(open('/proc/self/statm').read().split()[0]) * os.sysconf('SC_PAGE_SIZE')\n"
           "resource.setrlimit(resource.RLIMIT_AS, (size + (2 << 30), resource.RLIM_INFINITY))\n")


def _walk_bounded(run_python) -> list:
    result = run_python(WALK + BOUNDED + PRINT_SOURCES, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    return _sources(result)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse-4g", "directory"])
def test_an_entry_that_is_not_a_small_regular_file_is_refused_without_reading_it(
        warm_cache, fresh_dgemm_cache, kind, python_subprocess):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse-4g":
        with open(path, "wb") as sparse:
            sparse.truncate(4 << 30)
    else:
        path.mkdir(mode=0o700)
    assert _walk_bounded(python_subprocess) == ["compiled", "memory"]
    assert stat.S_ISREG(os.lstat(path).st_mode) and path.stat().st_size < 1 << 20


@needs_root
def test_a_device_node_at_an_entry_path_is_never_opened(warm_cache, fresh_dgemm_cache,
                                                       python_subprocess):
    path = _entry_path(fresh_dgemm_cache, warm_cache)
    path.unlink()
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))     # /dev/zero's numbers
    assert _walk_bounded(python_subprocess) == ["compiled", "memory"]


def test_read_blob_is_the_safe_reader_for_jobs(warm_cache, fresh_dgemm_cache, monkeypatch):
    disk = DiskTier(fresh_dgemm_cache)
    path = disk.entry_path(warm_cache)
    assert disk.read_blob(warm_cache) == path.read_bytes()
    with pytest.raises(FileNotFoundError):
        disk.read_blob("00" * 32)
    path.unlink()
    with open(path, "wb") as sparse:
        sparse.truncate(4 << 30)
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(safe_files.UnsafeFileError, match="at most 67108864"):
        disk.read_blob(warm_cache)
    assert reads == []
    path.unlink()
    os.mkfifo(path, 0o600)
    with pytest.raises(OSError, match="FIFO"):
        disk.read_blob(warm_cache)


def test_read_regular_stops_at_its_limit_when_a_file_grows(tmp_path):
    grown = tmp_path / "grows"
    grown.write_bytes(b"x" * 10)
    assert safe_files.read_regular(grown, 10) == b"x" * 10
    with pytest.raises(safe_files.UnsafeFileError, match="at most 9"):
        safe_files.read_regular(grown, 9)


SECRET = "from dgemm.jit import env\nprint(env.cache_secret())\n"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_secret_file_that_is_not_a_small_regular_file_is_a_clear_config_error(
        tmp_path, kind, python_subprocess):
    path = tmp_path / "secret"
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.symlink_to("/dev/zero")
    result = python_subprocess(SECRET, {"DGEMM_CACHE_SECRET_FILE": str(path)}, check=False,
                        timeout=30)
    assert result.returncode != 0 and "ConfigError" in result.stderr
    assert f"DGEMM_CACHE_SECRET_FILE={str(path)!r} cannot be used" in result.stderr


def test_a_secret_file_behind_a_symlink_is_read(tmp_path, monkeypatch):
    """Secret mounts (Kubernetes) are symlinks to regular files: those are followed."""
    (tmp_path / "real").write_bytes(b"team secret\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("DGEMM_CACHE_SECRET_FILE", str(tmp_path / "link"))
    assert env.cache_secret() == b"team secret"


@pytest.mark.parametrize("kind", ["big", "sparse", "directory"])
def test_a_huge_secret_file_or_a_directory_is_a_clear_config_error(tmp_path, monkeypatch,
                                                                      kind):
    path = tmp_path / "secret"
    if kind == "big":
        path.write_bytes(b"s" * (1 << 17))
    elif kind == "sparse":
        with open(path, "wb") as sparse:
            sparse.truncate(1 << 30)
    else:
        path.mkdir()
    monkeypatch.setenv("DGEMM_CACHE_SECRET_FILE", str(path))
    with pytest.raises(ConfigError, match="cannot be used.*at most 65536 bytes"):
        env.cache_secret()


# --- 8: a stopped holder of the node lock -------------------------------------------------------
HOLD_LOCK = ("import filelock, sys, time\n"
             "lock = filelock.FileLock(sys.argv[1], mode=0o600)\n"
             "lock.acquire()\n"
             "print('held', flush=True)\n"
             "time.sleep(600)\n")


@pytest.fixture
def stopped_lock_holder(precompiled_cache, fresh_dgemm_cache, monkeypatch):
    """A process holding this test's key's node lock, then SIGSTOPped; DGEMM_LOCK_TIMEOUT=30
    so that the old behaviour (wait for the lock) fails the test in 30 s instead of 600."""
    _, key = precompiled_cache
    disk = DiskTier(fresh_dgemm_cache)
    disk.ensure_dirs()
    monkeypatch.setenv("DGEMM_LOCK_TIMEOUT", "30")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(disk.lock_path(key))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.send_signal(signal.SIGSTOP)
        yield key
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait(timeout=30)


def _timed_walk(spec) -> tuple:
    started = time.monotonic()
    outcome = dgemm.jit.ensure_compiled_outcome(spec)
    return outcome.source, time.monotonic() - started


def test_a_stopped_lock_holder_does_not_block_a_kernel_redis_has(
        stopped_lock_holder, precompiled_cache, test_kernels, spec, redis_server, monkeypatch):
    root, key = precompiled_cache
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    redis_server.client().set(f"dgemm:entry:{key}", _entry_path(root, key).read_bytes())
    source, seconds = _timed_walk(spec)
    assert source == "remote" and seconds < 15
    assert dgemm.jit.stats()["compiles"] == 0


def test_a_stopped_lock_holder_does_not_block_a_kernel_that_appears_on_disk(
        stopped_lock_holder, precompiled_cache, test_kernels, spec, fresh_dgemm_cache):
    root, key = precompiled_cache
    publisher = threading.Timer(1.0, lambda: DiskTier(fresh_dgemm_cache).put_blob(
        key, _entry_path(root, key).read_bytes()))
    publisher.start()
    try:
        source, seconds = _timed_walk(spec)
    finally:
        publisher.join()
    assert source == "disk" and seconds < 15
    assert dgemm.jit.stats()["compiles"] == 0


def test_a_stopped_lock_holder_still_times_out_when_no_tier_has_the_kernel(
        stopped_lock_holder, test_kernels, spec, monkeypatch):
    monkeypatch.setenv("DGEMM_LOCK_TIMEOUT", "1.5")
    with pytest.raises(dgemm.jit.CompileLockTimeout, match="DGEMM_LOCK_TIMEOUT"):
        dgemm.jit.ensure_compiled(spec)
