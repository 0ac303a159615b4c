"""dgemm.jit.tiers: the disk layout, atomic publish, verification on read, clear dir errors."""
import dataclasses
import os
import stat
import time

import pytest

from dgemm.heuristics import select
from dgemm.jit import entry as entry_format
from dgemm.jit.errors import CacheDirError
from dgemm.jit.tiers import DiskTier, MemoryTier

KEY = "5e" * 32


def _blob(key=KEY, secret=None):
    sample = entry_format.Entry(
        key=key, spec=entry_format.canonical_spec(select("fp8_gemm_nt", 64, 2112, 7168)),
        compiler="nvrtc 13.0",
        flags=("-std=c++17",), symbol="_Z1kv", cubin=b"\x7fELF" + bytes(2000), created=1.0,
        compile_seconds=0.5)
    return entry_format.pack(sample, secret)


@pytest.fixture
def disk(fresh_dgemm_cache):
    return DiskTier(fresh_dgemm_cache)


def test_an_entry_lives_at_v1_shard_key_kbin(disk, fresh_dgemm_cache):
    disk.put_blob(KEY, _blob())
    assert (fresh_dgemm_cache / "v1" / KEY[:2] / f"{KEY}.kbin").read_bytes() == _blob()


def test_locks_and_temp_files_have_their_own_directories(disk, fresh_dgemm_cache):
    assert disk.lock_path(KEY) == fresh_dgemm_cache / "locks" / f"{KEY}.lock"
    assert disk.tmp_dir == fresh_dgemm_cache / "tmp"


@pytest.mark.parametrize("part", ["", "v1", "locks", "tmp"])
def test_cache_directories_are_created_private(disk, fresh_dgemm_cache, part):
    disk.put_blob(KEY, _blob())
    assert stat.S_IMODE((fresh_dgemm_cache / part).stat().st_mode) == 0o700


def test_a_published_entry_is_read_back_as_a_verified_entry_holding_its_blob(disk):
    disk.put_blob(KEY, _blob())
    found = disk.get(KEY)
    assert found == entry_format.unpack(_blob(), KEY) and found.blob == _blob()


def test_putting_an_entry_publishes_its_blob_as_it_is(disk):
    sealed = entry_format.seal(entry_format.unpack(_blob(), KEY), b"s")
    disk.put(sealed)
    assert disk.entry_path(KEY).read_bytes() == sealed.blob


def test_an_entry_without_a_blob_cannot_be_put(disk):
    unsealed = dataclasses.replace(entry_format.unpack(_blob(), KEY), blob=b"")
    with pytest.raises(ValueError, match="no blob"):
        disk.put(unsealed)


def test_a_missing_entry_is_a_miss(disk):
    assert disk.get(KEY) is None


def test_publishing_leaves_no_temp_file_behind(disk):
    disk.put_blob(KEY, _blob())
    assert list(disk.tmp_dir.iterdir()) == []


def test_a_hit_touches_the_mtime_for_lru_cleanup(disk):
    disk.put_blob(KEY, _blob())
    path = disk.entry_path(KEY)
    os.utime(path, (1_000_000, 1_000_000))
    disk.get(KEY)
    assert path.stat().st_mtime > time.time() - 60


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_damaged_entry_is_a_miss_and_is_deleted(disk, damage):
    blob = bytearray(_blob())
    if damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "flip":
        blob[len(blob) // 2] ^= 0x01
    elif damage == "garbage":
        blob = bytearray(b"not an entry at all")
    else:
        blob = bytearray()
    disk.put_blob(KEY, bytes(blob))
    assert disk.get(KEY) is None
    assert not disk.entry_path(KEY).exists()


def test_an_entry_stored_under_the_wrong_key_is_a_miss(disk):
    other = "77" * 32
    disk.put_blob(KEY, _blob(key=other))
    assert disk.get(KEY) is None


def test_an_unsigned_entry_is_a_miss_when_a_secret_is_set(fresh_dgemm_cache):
    DiskTier(fresh_dgemm_cache).put_blob(KEY, _blob())
    assert DiskTier(fresh_dgemm_cache, secret=b"s").get(KEY) is None


def test_a_signed_entry_is_a_hit_with_its_secret(fresh_dgemm_cache):
    DiskTier(fresh_dgemm_cache).put_blob(KEY, _blob(secret=b"s"))
    assert DiskTier(fresh_dgemm_cache, secret=b"s").get(KEY).blob == _blob(secret=b"s")


def test_iter_entries_lists_published_entries_only(disk):
    disk.put_blob(KEY, _blob())
    disk.ensure_dirs()
    (disk.tmp_dir / f"{'66' * 32}.123.abcd.tmp").write_bytes(b"in flight")
    assert [key for key, _ in disk.iter_entries()] == [KEY]


def test_a_key_that_is_not_hex_is_refused_as_a_file_name(disk):
    with pytest.raises(ValueError, match="64 lowercase hex"):
        disk.entry_path("../../etc/passwd")


def test_a_cache_dir_under_a_regular_file_gives_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    disk = DiskTier(blocker / "cache")
    with pytest.raises(CacheDirError) as raised:
        disk.put_blob(KEY, _blob())
    message = str(raised.value)
    assert str(blocker / "cache") in message and "DGEMM_CACHE_DIR" in message
    assert "Not a directory" in message


def test_reading_from_a_cache_dir_that_cannot_exist_is_a_miss(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert DiskTier(blocker / "cache").get(KEY) is None


def test_the_memory_tier_returns_what_was_put():
    memory, stored = MemoryTier(), entry_format.unpack(_blob(), KEY)
    memory.put(stored)
    assert memory.get(KEY) is stored and memory.get("00" * 32) is None
