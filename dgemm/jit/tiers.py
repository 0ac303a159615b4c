"""Cache tiers. Each has the same two methods:

    get(key) -> Entry | None   a verified Entry (holding its blob); a miss, or a bad or
                               unreadable entry (which is logged once and removed where
                               possible), returns None, never raises
    put(entry) -> None         store an Entry that was verified or built by this process

A tier verifies what it reads exactly once (`entry.unpack`) and hands up the Entry; nothing
above verifies it again, and putting it elsewhere writes its `blob` as it is. `cache.py` walks
the tiers fastest first; the remote tier (`remote.RemoteTier`) has the same shape.

The disk tier trusts only what another user cannot have planted: its root and subdirectories
must belong to this user and be writable by nobody else, and an entry is read only if it is a
regular file of this user's, writable by nobody else and at most MAX_ENTRY_BYTES long, opened
without following a symlink and without blocking (`safe_files.read_regular`). A directory that
fails the test makes the disk tier a miss for reads and a CacheDirError for writes (the walk
warns once and serves from memory); an entry that fails it is a bad entry (logged, removed).
"""
from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Iterator, Optional

from . import entry as entry_format
from . import env, safe_files, state
from .entry import Entry
from .errors import CacheDirError, EntryError
from .logs import logger, warning_once


_KEY_PATTERN = re.compile(r"^[0-9a-f]{64}$")
ENTRY_SUFFIX = ".kbin"
LOCK_SUFFIX = ".lock"
TMP_SUFFIX = ".tmp"
# The largest real cubin is a few hundred KiB; a file beyond this is not an entry.
MAX_ENTRY_BYTES = 64 << 20


def check_key(key: str) -> str:
    """Keys become file names: accept only 64 lowercase hex digits."""
    if not isinstance(key, str) or not _KEY_PATTERN.match(key):
        raise ValueError(f"cache key must be 64 lowercase hex digits; got {key!r}")
    return key


class MemoryTier:
    """Verified Entries of this process, by key, in a `state` table (the process-wide one by
    default, so `state.reset()` empties it). Thread-safe (single dict operations); never evicts
    (a job uses a few hundred specs at most, each a cubin of tens to hundreds of KiB)."""

    def __init__(self, entries: Optional[dict] = None):
        self._entries = {} if entries is None else entries

    def get(self, key: str) -> Optional[Entry]:
        return self._entries.get(key)

    def put(self, entry: Entry) -> None:
        self._entries[entry.key] = entry


_disk_tiers = state.table("jit.disk_tiers")     # (root, secret) -> DiskTier


def disk_tier(root: Path, secret: Optional[bytes]) -> "DiskTier":
    """This process's DiskTier for (root, secret), so that "log a bad entry once" holds."""
    found = _disk_tiers.get((root, secret))
    if found is None:
        found = _disk_tiers.setdefault((root, secret), DiskTier(root, secret))
    return found


class DiskTier:
    """The node-local disk tier, laid out as docs/architecture.md describes it:

        <root>/v1/<key[:2]>/<key>.kbin   entries (published by rename, read without a lock)
        <root>/locks/<key>.lock          per-key compile locks (filelock)
        <root>/tmp/                      temp files of publishes in flight

    Directories are created 0700 on first write, and every one of them (root included) must
    belong to this user and be writable by nobody else before anything in it is read or
    written (see the module docstring).

    `unpack(blob, key, secret)` is the verification of what it reads: kernel entries
    (`entry.unpack`) when None; the decisions tier (`dgemm.jit.decisions`) passes `entry.unpack_decision`, under
    a root of its own, so neither kind is ever read as the other.
    """

    def __init__(self, root: Path, secret: Optional[bytes] = None,
                 unpack=None):
        self.root = Path(root)
        self.secret = secret
        self._unpack = unpack
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
        """Create root, v1/, locks/ and tmp/ (0700) and check that they are private;
        CacheDirError naming path, cause and fix."""
        self._ensure_private(self.root, self.entries_dir, self.locks_dir, self.tmp_dir)
        _check_writable(self.tmp_dir)

    def ensure_lock_dir(self) -> None:
        """Create root and locks/ (0700) and check that they are private and writable; the
        per-key locks need nothing else. CacheDirError naming path, cause and fix."""
        self._ensure_private(self.root, self.locks_dir)
        _check_writable(self.locks_dir)

    def check_private(self) -> None:
        """CacheDirError (naming the directory, what is wrong and the fix) when the root or
        any subdirectory of it that exists (v1/, its shards, locks/, tmp/) is not a directory
        of this user's that only it can write. A root that does not exist yet passes. For
        commands that operate on a cache directory: call it before reading or changing one."""
        try:
            directories = list(self._directories())
        except OSError as error:
            raise _cache_dir_error(self.root, "cannot be listed", error) from error
        for directory in directories:
            check_private_dir(directory)

    def read_blob(self, key: str) -> bytes:
        """The raw, unverified bytes of `key`'s entry, read safely: only a regular file of at
        most MAX_ENTRY_BYTES owned by this user and writable by nobody else, opened without
        following a symlink and without blocking. FileNotFoundError when there is none;
        safe_files.UnsafeFileError (an OSError) for a file that must not be read; OSError for
        other read failures. Does not check the directories (see `check_private`)."""
        return safe_files.read_regular(self.entry_path(key), MAX_ENTRY_BYTES, private=True)

    # --- the Tier interface ---------------------------------------------------------------------
    def get(self, key: str) -> Optional[Entry]:
        """The verified Entry (one `entry.unpack`), or None; a hit refreshes the mtime. A
        directory another user could have written makes every read a miss (warned once); an
        entry that cannot be read safely or verified is logged once and removed."""
        path = self.entry_path(key)
        if not self._trusted(self.root, self.entries_dir, path.parent):
            return None
        try:
            blob = self.read_blob(key)
        except FileNotFoundError:
            return None
        except OSError as error:
            self._report(path, f"cannot be read ({error}); deleting it so it is rebuilt")
            self.remove(key)
            return None
        try:
            entry = (self._unpack or entry_format.unpack)(blob, key, self.secret)
        except EntryError as error:
            self._report(path, f"is invalid ({error}); deleting it so it is rebuilt")
            self.remove(key)
            return None
        try:
            os.utime(path)      # LRU clock for the cleanup job
        except OSError:
            pass                # a read-only cache still serves hits
        return entry

    def put(self, entry: Entry) -> None:
        """Publish `entry.blob` under `entry.key` (see `put_blob`)."""
        if not entry.blob:
            raise ValueError(f"entry {entry.key[:12]} has no blob; expected one from "
                             f"entry.unpack or entry.seal")
        self.put_blob(entry.key, entry.blob)

    def put_blob(self, key: str, blob: bytes) -> None:
        """Publish bytes the caller has verified, atomically: temp file in tmp/ (same
        filesystem), fsync, rename onto the final name, fsync the directory. Readers see the
        old state or the whole entry, never a part."""
        final = self.entry_path(key)
        self._ensure_private(self.root, self.entries_dir, final.parent, self.tmp_dir)
        _check_writable(self.tmp_dir)
        # The whole layout on first write; publishing itself does not need locks/.
        _mkdir_quietly(self.locks_dir)
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

    def _ensure_private(self, *directories: Path) -> None:
        for directory in directories:
            try:
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as error:
                raise _cache_dir_error(directory, "cannot be created", error) from error
            check_private_dir(directory)

    def _trusted(self, *directories: Path) -> bool:
        """True when every one of `directories` exists and is private; a missing (or
        unreachable) one is a quiet miss, one another user could write is warned about once
        per directory."""
        for directory in directories:
            try:
                problem = safe_files.private_dir_problem(directory)
            except OSError:
                return False        # writing will say what is wrong, if anything is tried
            if problem is not None:
                warning_once(f"untrusted-dir:{directory}",
                             "dgemm: not using the disk cache %s: %s Kernels are served from "
                             "memory, the remote cache or a fresh compile until it is fixed.",
                             self.root, _private_dir_message(directory, problem))
                return False
        return True

    def _directories(self) -> Iterator[Path]:
        """The root and each of its subdirectories that exists."""
        yield self.root
        for directory in (self.entries_dir, self.locks_dir, self.tmp_dir):
            if directory.exists():
                yield directory
        if self.entries_dir.is_dir():
            yield from (shard for shard in self.entries_dir.iterdir() if shard.is_dir())


def check_private_dir(path: Path) -> None:
    """CacheDirError (what is wrong and the fix) unless `path` is a directory owned by this
    process's effective user that group and others cannot write (another user could plant
    kernels in it). A path that does not exist passes: it holds nothing to trust."""
    try:
        problem = safe_files.private_dir_problem(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise _cache_dir_error(Path(path), "cannot be examined", error) from error
    if problem is not None:
        raise CacheDirError(_private_dir_message(Path(path), problem))


def _private_dir_message(path: Path, problem: str) -> str:
    if problem == safe_files.NOT_A_DIRECTORY:
        return (f"dgemm cache directory {path} is not a directory. Remove or rename it, or "
                f"set DGEMM_CACHE_DIR to another directory.")
    return (f"dgemm cache directory {path} {problem}, so another user could plant kernels in "
            f"it. Make it yours and private (`chown $(id -u) {path} && chmod 700 {path}`), or "
            f"set DGEMM_CACHE_DIR to a directory only you can write.")


def _check_writable(directory: Path) -> None:
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CacheDirError(f"dgemm cache directory {directory} is not writable by this "
                            f"user. Fix its permissions, or set DGEMM_CACHE_DIR to a "
                            f"writable node-local directory.")


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
    except IsADirectoryError:
        _rmdir_quietly(path)       # something made a directory at an entry's name
    except OSError:
        pass


def _mkdir_quietly(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        pass


def _rmdir_quietly(path: Path) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass
