"""One-file bundles of verified entries, for clusters that cannot reach each other's Redis
(air-gapped sites): export on a connected host, carry the file, import on the other side.

A bundle is an uncompressed tar file (inspectable with `tar tvf`; cubins hardly compress):

    manifest.json        {"format": "dgemm-bundle", "version": 1, "created": <unix s>,
                          "entries": [{"key", "sha256", "bytes", "arch", "compiler"}, ...]}
    entries/<key>.kbin   one entry blob each (dgemm.jit.entry format)

Import never extracts to the filesystem: each member is read into memory, checked against
the manifest's sha256 and verified with dgemm.jit.entry.unpack (digest, key, and HMAC when a
secret is set) before the verified Entry is handed on. Anything else is refused and counted.

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
_MEMBER = re.compile(r"^entries/([0-9a-f]{64})\.kbin$")
_MAX_MEMBER_BYTES = 256 << 20       # far above any cubin; bounds memory on a hostile bundle


class BundleError(DgemmError):
    """The file is not a dgemm bundle this version can read."""


@dataclasses.dataclass
class BundleReport:
    entries: int = 0        # written to the bundle, or accepted from it
    refused: int = 0        # failed verification (import) or unreadable (export)
    bytes: int = 0


def export_bundle(path: Path, entries: Iterable[Entry], progress: Optional[Callable] = None
                  ) -> BundleReport:
    """Write verified Entries (their blobs) to a bundle at `path`, atomically (temp + rename)."""
    path = Path(path)
    report, listed = BundleReport(), []
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(temp, "w") as tar:
            for entry in entries:
                key, blob = entry.key, entry.blob
                listed.append({"key": key, "sha256": hashlib.sha256(blob).hexdigest(),
                               "bytes": len(blob), "arch": entry.spec_fields["arch"],
                               "compiler": entry.compiler})
                _add(tar, f"entries/{key}.kbin", blob)
                report.entries += 1
                report.bytes += len(blob)
                if progress:
                    progress(key[:12])
            manifest = {"format": FORMAT, "version": VERSION, "created": time.time(),
                        "entries": listed}
            _add(tar, MANIFEST, json.dumps(manifest, indent=1).encode())
        os.replace(temp, path)
    finally:
        if temp.exists():
            temp.unlink()
    return report


def import_bundle(path: Path, secret: Optional[bytes], accept: Callable[[Entry], None],
                  progress: Optional[Callable] = None) -> BundleReport:
    """Verify every entry of the bundle and hand the good ones to `accept(entry)`."""
    report = BundleReport()
    try:
        tar = tarfile.open(path, "r:")
    except (OSError, tarfile.TarError) as error:
        raise BundleError(f"{path} is not a readable dgemm bundle ({error}); expected a file "
                          f"written by `dgemm-cache export`") from error
    with tar:
        expected = _read_manifest(tar, path)
        for member in tar.getmembers():
            match = _MEMBER.match(member.name)
            if match is None:
                continue
            key = match.group(1)
            blob = _read_member(tar, member)
            entry = None if blob is None else _verified(blob, key, expected.get(key), secret)
            if entry is None:
                report.refused += 1
            else:
                accept(entry)
                report.entries += 1
                report.bytes += len(blob)
            if progress:
                progress(key[:12])
    return report


# ------------------------------------------------------------------------------------------------
def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
    tar.addfile(info, io.BytesIO(data))


def _read_manifest(tar: tarfile.TarFile, path: Path) -> dict:
    """key -> sha256 from the manifest."""
    try:
        manifest = json.loads(tar.extractfile(MANIFEST).read())
    except (KeyError, AttributeError, ValueError) as error:
        raise BundleError(f"{path} has no readable {MANIFEST} ({error}); expected a file "
                          f"written by `dgemm-cache export`") from error
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise BundleError(f"{path} is {manifest.get('format')!r} version "
                          f"{manifest.get('version')!r}; this dgemm reads {FORMAT!r} version "
                          f"{VERSION}")
    return {item["key"]: item["sha256"] for item in manifest.get("entries", [])}


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Optional[bytes]:
    if not member.isfile() or member.size > _MAX_MEMBER_BYTES:
        return None
    handle = tar.extractfile(member)
    return None if handle is None else handle.read()


def _verified(blob: bytes, key: str, sha256: Optional[str],
              secret: Optional[bytes]) -> Optional[Entry]:
    """The verified Entry, or None when the blob does not match the manifest or its checks."""
    if sha256 != hashlib.sha256(blob).hexdigest():
        return None
    try:
        return entry_format.unpack(blob, key, secret)
    except EntryError:
        return None
