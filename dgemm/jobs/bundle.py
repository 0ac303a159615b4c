"""One-file bundles of verified entries, for clusters that cannot reach each other's Redis
(air-gapped sites): export on a connected host, carry the file, import on the other side.

A bundle is an uncompressed tar file (inspectable with `tar tvf`; cubins hardly compress):

    manifest.json        {"format": "dgemm-bundle", "version": 1, "created": <unix s>,
                          "entries": [{"key", "sha256", "bytes", "arch", "compiler"}, ...]}
    entries/<key>.kbin   one entry blob each (dgemm.jit.entry format)

Export writes a temp file beside FILE and renames it onto FILE only when FILE does not exist
or is a regular file: a symlink, FIFO, device or directory at FILE is refused
(`ExportTargetError`), never replaced, and so is a missing directory.

Import reads only a regular file and never extracts to the filesystem. The whole bundle is
checked first: a readable tar, a manifest of the right types, every entry member a regular
file of bounded size within the file; anything else refuses the bundle (`BundleError`) before
any entry is imported. Then each member is read into memory, checked against the manifest's
sha256 and verified with dgemm.jit.entry.unpack (digest, key, and HMAC when a secret is set)
before the verified Entry is handed on; an entry that fails is refused, and the report names
it (key, the kernel its header claims) with the reason.

NOTES: this lives in dgemm (it moved here from cache_service) because a bundle is made of
dgemm entries, verified and described with dgemm's entry format; it never touches Redis.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import secrets
import stat as stat_module
import tarfile
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from dgemm.jit import entry as entry_format
from dgemm.jit.entry import Entry
from dgemm.jit.errors import DgemmError, EntryError

FORMAT = "dgemm-bundle"
VERSION = 1
MANIFEST = "manifest.json"
_KEY = re.compile(r"^[0-9a-f]{64}$")
_MEMBER = re.compile(r"^entries/([0-9a-f]{64})\.kbin$")
_MAX_MEMBER_BYTES = 256 << 20       # far above any cubin; bounds memory on a hostile bundle
_MAX_MANIFEST_BYTES = 64 << 20      # ~300,000 entries of ~200 bytes
_MAX_MEMBERS = 300_000              # tar headers held in memory while the bundle is checked


class BundleError(DgemmError, ValueError):
    """The file is not a dgemm bundle this version can read; nothing was imported from it."""


class ExportError(DgemmError):
    """A bundle could not be written (e.g. the disk is full); FILE is left as it was."""


class ExportTargetError(ExportError, ValueError):
    """The export path cannot take a bundle: its directory is missing, or it is a symlink,
    FIFO, device or directory that renaming a new file onto it would replace."""


@dataclasses.dataclass
class BundleReport:
    entries: int = 0        # written to the bundle, or accepted from it
    refused: int = 0        # failed verification (import) or not exportable (export)
    bytes: int = 0
    # One {"key", "kernel", "reason"} per refused entry of an import: "kernel" is what its
    # unverified header claims (e.g. "fp8_gemm normal n=4096 k=7168 sm_90a"), or None.
    refusals: list = dataclasses.field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# Export
# ------------------------------------------------------------------------------------------------
def export_bundle(path: Path, entries: Iterable[Entry], progress: Optional[Callable] = None
                  ) -> BundleReport:
    """Write verified Entries (their blobs) to a bundle at `path`, atomically: a new temp file
    beside it, renamed onto `path` (see `check_export_target`)."""
    path = Path(path)
    check_export_target(path)
    descriptor, temp = _create_temp_beside(path)
    try:
        with os.fdopen(descriptor, "wb") as file:
            report = _write_tar(file, entries, progress)
            file.flush()
            os.fsync(file.fileno())
        check_export_target(path)       # again, just before the rename
        os.replace(temp, path)
    except OSError as error:
        raise ExportError(f"cannot write bundle {path}: {error.strerror or error}") from error
    finally:
        _unlink_quietly(temp)
    return report


def check_export_target(path: Path) -> None:
    """ExportTargetError unless `path`'s directory exists and `path` is missing or a regular
    file (looked at with lstat: a symlink at `path` is refused, not followed)."""
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ExportTargetError(f"cannot export to {path}: directory {parent} {what}; create "
                                f"it or choose another path")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise ExportTargetError(f"cannot export to {path}: {error.strerror or error}") from error
    if not stat_module.S_ISREG(mode):
        raise ExportTargetError(f"refusing to export to {path}: it is {_kind(mode)}, and export "
                                f"would replace it; give a new file name or a regular file")


def _create_temp_beside(path: Path) -> tuple:
    """A new file in `path`'s directory (same filesystem, so the rename is atomic), created
    exclusively under an unguessable name: nothing planted there can be followed or reused."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(temp, flags, 0o666), temp
    except OSError as error:
        raise ExportTargetError(f"cannot create a file in {path.parent}: "
                                f"{error.strerror or error}") from error


def _write_tar(file, entries: Iterable[Entry], progress: Optional[Callable]) -> BundleReport:
    report, listed = BundleReport(), []
    with tarfile.open(fileobj=file, mode="w") as tar:
        for entry in entries:
            key, blob = entry.key, entry.blob
            if not isinstance(key, str) or not _KEY.match(key) or not blob:
                report.refused += 1         # a member name must never leave entries/
                continue
            listed.append({"key": key, "sha256": hashlib.sha256(blob).hexdigest(),
                           "bytes": len(blob), "arch": entry.spec_fields.get("arch"),
                           "compiler": entry.compiler})
            _add(tar, f"entries/{key}.kbin", blob)
            report.entries += 1
            report.bytes += len(blob)
            if progress:
                progress(key[:12])
        manifest = {"format": FORMAT, "version": VERSION, "created": time.time(),
                    "entries": listed}
        _add(tar, MANIFEST, json.dumps(manifest, indent=1).encode())
    return report


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
    tar.addfile(info, io.BytesIO(data))


# ------------------------------------------------------------------------------------------------
# Import
# ------------------------------------------------------------------------------------------------
def import_bundle(path: Path, secret: Optional[bytes], accept: Callable[[Entry], None],
                  progress: Optional[Callable] = None) -> BundleReport:
    """Verify every entry of the bundle and hand the good ones to `accept(entry)`. BundleError
    (nothing imported) when the file is not a well-formed bundle."""
    path = Path(path)
    report = BundleReport()
    with _open_regular(path) as file:
        size = os.fstat(file.fileno()).st_size
        with _reading(path, lambda: tarfile.open(fileobj=file, mode="r:")) as tar:
            members = _reading(path, lambda: _checked_members(tar, path, size))
            expected = _reading(path, lambda: _read_manifest(tar, members.pop(MANIFEST, None),
                                                             path))
            for key, member in members.items():
                blob = _reading(path, lambda: tar.extractfile(member).read())
                try:
                    entry = _verified(blob, key, expected.get(key), secret)
                except EntryError as error:
                    report.refused += 1
                    report.refusals.append({"key": key, "kernel": _claimed_kernel(blob),
                                            "reason": str(error)})
                else:
                    accept(entry)
                    report.entries += 1
                    report.bytes += len(blob)
                if progress:
                    progress(key[:12])
    return report


def _reading(path: Path, read: Callable):
    """read(), with whatever a damaged or crafted tar makes it raise turned into BundleError."""
    try:
        return read()
    except BundleError:
        raise
    except _TAR_ERRORS as error:
        raise _not_a_bundle(path, f"{type(error).__name__}: {error}") from error


# What a damaged or crafted tar can raise while it is read.
_TAR_ERRORS = (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError, OverflowError)


def _not_a_bundle(path: Path, why: str) -> BundleError:
    return BundleError(f"{path} is not a readable dgemm bundle ({why}); expected a file "
                       f"written by `dgemm-cache export`")


def _open_regular(path: Path):
    """`path` opened for reading if it is a regular file (without blocking on a FIFO)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise _not_a_bundle(path, error.strerror or str(error)) from error
    mode = os.fstat(descriptor).st_mode
    if not stat_module.S_ISREG(mode):
        os.close(descriptor)
        raise _not_a_bundle(path, f"it is {_kind(mode)}")
    return os.fdopen(descriptor, "rb")


def _checked_members(tar: tarfile.TarFile, path: Path, size: int) -> dict:
    """{MANIFEST or key: member} after checking the whole archive: every member dgemm reads is
    a regular file of bounded size that lies within the file. Other names are ignored."""
    found = {}
    for count, member in enumerate(tar, start=1):
        if count > _MAX_MEMBERS:
            raise _not_a_bundle(path, f"more than {_MAX_MEMBERS} members")
        match = _MEMBER.match(member.name)
        if match is None and member.name != MANIFEST:
            continue
        limit = _MAX_MANIFEST_BYTES if match is None else _MAX_MEMBER_BYTES
        if not member.isreg():
            raise _not_a_bundle(path, f"member {member.name} is not a regular file")
        if member.size > limit:
            raise _not_a_bundle(path, f"member {member.name} claims {member.size} bytes; at "
                                      f"most {limit} expected")
        if member.offset_data + member.size > size:
            raise _not_a_bundle(path, f"truncated: member {member.name} ends past the end of "
                                      f"the file")
        found[MANIFEST if match is None else match.group(1)] = member
    return found


def _read_manifest(tar: tarfile.TarFile, member, path: Path) -> dict:
    """key -> sha256 from the manifest, after checking its shape."""
    if member is None:
        raise _not_a_bundle(path, f"no {MANIFEST}")
    try:
        manifest = json.loads(tar.extractfile(member).read())
    except RecursionError:
        raise _not_a_bundle(path, f"{MANIFEST} is nested too deeply") from None
    except ValueError as error:         # not JSON, or not UTF-8
        raise _not_a_bundle(path, f"{MANIFEST} is not JSON: {error}") from error
    if not isinstance(manifest, dict):
        raise _not_a_bundle(path, f"{MANIFEST} is a JSON {type(manifest).__name__}, not an "
                                  f"object")
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise BundleError(f"{path} is {_short(manifest.get('format'))} version "
                          f"{_short(manifest.get('version'))}; this dgemm reads {FORMAT!r} "
                          f"version {VERSION}")
    listed = manifest.get("entries", [])
    if not isinstance(listed, list):
        raise _not_a_bundle(path, f"{MANIFEST} 'entries' is {_short(listed)}, not a list")
    expected = {}
    for index, item in enumerate(listed):
        fields = (item.get("key"), item.get("sha256")) if isinstance(item, dict) else ()
        if len(fields) != 2 or not all(isinstance(f, str) and _KEY.match(f) for f in fields):
            raise _not_a_bundle(path, f"{MANIFEST} entries[{index}] is {_short(item)}; "
                                      f"expected an object with 64-hex 'key' and 'sha256'")
        expected[fields[0]] = fields[1]
    return expected


def _verified(blob: bytes, key: str, sha256: Optional[str], secret: Optional[bytes]) -> Entry:
    """The verified Entry; EntryError saying why when the blob does not match the manifest or
    fails its checks."""
    if sha256 is None:
        raise EntryError(f"the bundle's {MANIFEST} does not list it")
    if sha256 != hashlib.sha256(blob).hexdigest():
        raise EntryError(f"its sha256 differs from the one in the bundle's {MANIFEST} (the "
                         f"file was damaged or altered after export)")
    return entry_format.unpack(blob, key, secret)


def _claimed_kernel(blob: bytes) -> Optional[str]:
    """What a refused blob's header says it is, for the report (unverified, so only shown);
    None when not even the header can be read."""
    try:
        spec = entry_format.read_header(blob)["spec"]
    except EntryError:
        return None
    fields = [spec.get(name) for name in ("kernel", "gemm_type")]
    fields += [f"{name}={spec.get(name)}" for name in ("n", "k") if name in spec]
    fields.append(spec.get("arch"))
    return " ".join(str(field) for field in fields if field is not None)[:120]


# ------------------------------------------------------------------------------------------------
_KINDS = ((stat_module.S_ISLNK, "a symlink"), (stat_module.S_ISDIR, "a directory"),
          (stat_module.S_ISFIFO, "a FIFO"), (stat_module.S_ISCHR, "a character device"),
          (stat_module.S_ISBLK, "a block device"), (stat_module.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _short(value) -> str:
    """A value from an untrusted file in one short line (containers by type and size only:
    their repr could be huge or nested too deeply to print)."""
    if isinstance(value, (list, dict)):
        return f"a JSON {'array' if isinstance(value, list) else 'object'} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
