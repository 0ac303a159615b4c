"""Cache tiers. Each has the same two methods:

    get(key) -> bytes | None   a verified blob; a miss, or a bad or unreadable entry (which is
                               logged once and removed where possible), returns None, never raises
    put(key, blob) -> None     store a blob the caller has already verified

`cache.py` walks them fastest first. The remote tier (cache_service) has the same shape.
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import threading
from pathlib import Path
from typing import Iterator, Optional

from . import entry as entry_format
from . import env
from .errors import CacheDirError, EntryError

logger = logging.getLogger("dgemm.jit")

_KEY_PATTERN = re.compile(r"^[0-9a-f]{64}$")
ENTRY_SUFFIX = ".kbin"
LOCK_SUFFIX = ".lock"
TMP_SUFFIX = ".tmp"


def check_key(key: str) -> str:
    """Keys become file names: accept only 64 lowercase hex digits."""
    if not isinstance(key, str) or not _KEY_PATTERN.match(key):
        raise ValueError(f"cache key must be 64 lowercase hex digits; got {key!r}")
    return key


class MemoryTier:
    """Blobs of this process, by key. Thread-safe; never evicts (a job uses a few hundred specs
    at most, each a cubin of tens to hundreds of KiB)."""

    def __init__(self):
        self._blobs: dict = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> Optional[bytes]:
        with self._lock:
            return self._blobs.get(key)

    def put(self, key: str, blob: bytes) -> None:
        with self._lock:
            self._blobs[key] = blob

    def clear(self) -> None:
        with self._lock:
            self._blobs.clear()

    def __len__(self) -> int:
        return len(self._blobs)


class DiskTier:
    """The node-local disk tier, laid out as DESIGN.md fixes it:

        <root>/v1/<key[:2]>/<key>.kbin   entries (published by rename, read without a lock)
        <root>/locks/<key>.lock          per-key compile locks (filelock)
        <root>/tmp/                      temp files of publishes in flight

    Directories are created 0700 on first write.
    """

    def __init__(self, root: Path, secret: Optional[bytes] = None):
        self.root = Path(root)
        self.secret = secret
        self.entries_dir = self.root / "v1"
        self.locks_dir = self.root / "locks"
        self.tmp_dir = self.root / "tmp"
        self._reported: set = set()     # entry paths already logged as corrupt

    # --- paths (also used by the cleanup job and the CLI) ---------------------------------
    def entry_path(self, key: str) -> Path:
        check_key(key)
        return self.entries_dir / key[:2] / f"{key}{ENTRY_SUFFIX}"

    def lock_path(self, key: str) -> Path:
        check_key(key)
        return self.locks_dir / f"{key}{LOCK_SUFFIX}"

    def iter_entries(self) -> Iterator[tuple]:
        """(key, path) of every published entry, in no particular order. Temp files of
        in-flight publishes live in tmp/ and are never listed."""
        if not self.entries_dir.is_dir():
            return
        for shard in self.entries_dir.iterdir():
            if not shard.is_dir():
                continue
            for path in shard.glob(f"*{ENTRY_SUFFIX}"):
                key = path.name[:-len(ENTRY_SUFFIX)]
                if _KEY_PATTERN.match(key):
                    yield key, path

    def ensure_dirs(self) -> None:
        """Create root, v1/, locks/ and tmp/ (0700); CacheDirError naming path, cause and fix."""
        for directory in (self.root, self.entries_dir, self.locks_dir, self.tmp_dir):
            try:
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as error:
                raise _cache_dir_error(directory, "cannot be created", error) from error
        if not os.access(self.tmp_dir, os.W_OK | os.X_OK):
            raise CacheDirError(f"dgemm cache directory {self.tmp_dir} is not writable by this "
                                f"user. Fix its permissions, or set DGEMM_CACHE_DIR to a "
                                f"writable node-local directory.")

    # --- the Tier interface ---------------------------------------------------------------------
    def get(self, key: str) -> Optional[bytes]:
        path = self.entry_path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            self._report(path, f"cannot be read ({error.strerror}); treating it as a miss")
            return None
        try:
            entry_format.unpack(blob, key, self.secret)
        except EntryError as error:
            self._report(path, f"is invalid ({error}); deleting it so it is rebuilt")
            self.remove(key)
            return None
        try:
            os.utime(path)      # LRU clock for the cleanup job
        except OSError:
            pass                # a read-only cache still serves hits
        return blob

    def put(self, key: str, blob: bytes) -> None:
        """Publish atomically: temp file in tmp/ (same filesystem), fsync, rename onto the final
        name, fsync the directory. Readers see the old state or the whole entry, never a part."""
        final = self.entry_path(key)
        self.ensure_dirs()
        temp = self.tmp_dir / f"{key}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"
        try:
            descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(descriptor, view):]
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            env.pause_for_tests("publish")
            final.parent.mkdir(mode=0o700, exist_ok=True)
            os.replace(temp, final)
            _fsync_dir(final.parent)
        except OSError as error:
            _remove_quietly(temp)
            raise _cache_dir_error(final.parent, "cannot be written", error) from error

    def remove(self, key: str) -> None:
        _remove_quietly(self.entry_path(key))

    def _report(self, path: Path, what: str) -> None:
        if path not in self._reported:
            self._reported.add(path)
            logger.warning("dgemm cache entry %s %s", path, what)


def _cache_dir_error(path: Path, what: str, error: OSError) -> CacheDirError:
    return CacheDirError(
        f"dgemm cache directory {path} {what}: {error.strerror or error} "
        f"({type(error).__name__}). Set DGEMM_CACHE_DIR to a writable node-local directory "
        f"(default ~/.cache/dgemm), or fix the permissions of {path}.")


def _fsync_dir(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
