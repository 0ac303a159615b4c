"""Reading files that someone else may have put in our way, and trusting directories.

    read_regular(path, limit, follow_symlinks=False, private=False) -> bytes
    private_dir_problem(path) -> str | None

`read_regular` reads a whole file only when it is a regular file of at most `limit` bytes: it
never blocks on a FIFO (the open is non-blocking and a FIFO is refused before it is read), never
opens a device node, never follows a symbolic link unless asked to (`O_NOFOLLOW`) and never
reads a huge or sparse file whole (the size is checked first, and the read stops at `limit`).
With `private=True` the file must also belong to this process's effective user and be writable
by nobody else, the test the cache applies to entries (another user could have planted them).

A refusal raises `UnsafeFileError`, an OSError, so callers that already treat "cannot be read"
as a problem (a bad cache entry, an unreadable file in a listing) handle it the same way; a
missing file raises FileNotFoundError as `open` does.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Optional, Union

PathLike = Union[str, Path]
_GROUP_OR_OTHER_WRITE = stat.S_IWGRP | stat.S_IWOTH
NOT_A_DIRECTORY = "is not a directory"


class UnsafeFileError(OSError):
    """A file that must not be read: not a regular file, too large, a symbolic link where none
    is followed, or (for private reads) owned by another user or writable by others."""


def read_regular(path: PathLike, limit: int, follow_symlinks: bool = False,
                 private: bool = False) -> bytes:
    """The bytes of the regular file `path` (at most `limit` bytes), read without blocking,
    without following a symlink at `path` itself (unless `follow_symlinks`) and, with
    `private`, only when this user owns it and nobody else may write it. UnsafeFileError for a
    refusal, FileNotFoundError when it is missing, OSError for other failures."""
    path = os.fspath(path)
    # Look before opening: opening a device node can have effects of its own.
    before = os.stat(path) if follow_symlinks else os.lstat(path)
    _check_regular(path, before, limit, private)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks:
            raise UnsafeFileError(f"{path} is a symbolic link; it is not followed") from error
        raise
    try:
        opened = os.fstat(descriptor)
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise UnsafeFileError(f"{path} was replaced while it was being opened")
        _check_regular(path, opened, limit, private)
        return _read_at_most(descriptor, path, limit)
    finally:
        os.close(descriptor)


def private_dir_problem(path: PathLike) -> Optional[str]:
    """None when `path` is a directory (symlinks followed) owned by this process's effective
    user that group and others cannot write; otherwise what is wrong with it, as a phrase
    ("is owned by uid 65534, not by uid 1000 (this user)"). FileNotFoundError when missing."""
    found = os.stat(path)
    if not stat.S_ISDIR(found.st_mode):
        return NOT_A_DIRECTORY
    if found.st_uid != os.geteuid():
        return f"is owned by uid {found.st_uid}, not by uid {os.geteuid()} (this user)"
    if found.st_mode & _GROUP_OR_OTHER_WRITE:
        return (f"is writable by group or others (mode "
                f"{stat.S_IMODE(found.st_mode):04o})")
    return None


def check_private_regular(path: PathLike, found: os.stat_result, limit: int) -> None:
    """UnsafeFileError unless `found` (an lstat or fstat of `path`) is a regular file of at
    most `limit` bytes, owned by this user and writable by no one else."""
    _check_regular(str(path), found, limit, private=True)


def _check_regular(path: str, found: os.stat_result, limit: int, private: bool) -> None:
    if stat.S_ISLNK(found.st_mode):
        raise UnsafeFileError(f"{path} is a symbolic link; it is not followed")
    if not stat.S_ISREG(found.st_mode):
        raise UnsafeFileError(f"{path} is not a regular file ({_kind(found.st_mode)})")
    if found.st_size > limit:
        raise UnsafeFileError(f"{path} is {found.st_size} bytes; at most {limit} are read")
    if private and found.st_uid != os.geteuid():
        raise UnsafeFileError(f"{path} is owned by uid {found.st_uid}, not by uid "
                              f"{os.geteuid()} (this user)")
    if private and found.st_mode & _GROUP_OR_OTHER_WRITE:
        raise UnsafeFileError(f"{path} is writable by group or others (mode "
                              f"{stat.S_IMODE(found.st_mode):04o})")


def _read_at_most(descriptor: int, path: str, limit: int) -> bytes:
    """Everything up to end of file; UnsafeFileError if the file holds more than `limit`
    bytes (it grew after the size check)."""
    chunks, total = [], 0
    while True:
        chunk = os.read(descriptor, min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise UnsafeFileError(f"{path} grew past {limit} bytes while being read")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return f"mode {mode:o}"
