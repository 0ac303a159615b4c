"""One cache entry = one bytes object, so a reader can never pair one writer's cubin with
another writer's metadata. Never pickled.

Layout (little-endian):

    prefix   magic b"DGEMMKB\\0" | u16 format version | u8 flags (bit 0: signed) | u8 0 | u32 n
    header   n bytes of UTF-8 JSON: key, spec, compiler, flags, symbol, created,
             compile_seconds, cubin_sha256, size
    cubin    `size` bytes
    checksum sha256(prefix + header + cubin), so a flipped bit anywhere is caught
    [hmac]   HMAC-SHA256(secret, prefix + header + cubin), present when flags bit 0 is set

With a secret configured, unsigned or badly signed entries are rejected. Without one, a signed
entry is accepted on its checksum (its HMAC cannot be checked, but its integrity can).

The JIT is generic: `Entry.spec` is the spec's canonical JSON (what `spec.to_json()` returned),
never a spec object, so this module knows no spec class. `unpack` is the one verification; the
Entry it returns keeps its blob, so tiers hand the verified Entry on (and re-publish its blob)
without verifying again. `seal` packs a fresh Entry and keeps the blob it made, unverified
because this process just built it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import struct
from typing import Optional

from .errors import EntryError

MAGIC = b"DGEMMKB\0"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sHBxI")
_SIGNED = 0x1
_DIGEST_SIZE = 32
_MAX_HEADER = 1 << 20          # a header is a few hundred bytes; anything huge is corruption


@dataclasses.dataclass(frozen=True)
class Entry:
    key: str
    spec: str                    # the spec's canonical JSON (`spec.to_json()`)
    compiler: str                # "<name> <version>", e.g. "nvrtc 13.0"
    flags: tuple                 # the compiler flags that entered the key
    symbol: str                  # the kernel's mangled entry name inside the cubin
    cubin: bytes
    created: float               # unix time of the compile
    compile_seconds: float
    # The blob this Entry was unpacked from or sealed into (empty for one not yet packed):
    # what tiers store and publish. Not part of equality: the fields above are the entry.
    blob: bytes = dataclasses.field(default=b"", repr=False, compare=False)

    @property
    def cubin_sha256(self) -> str:
        return hashlib.sha256(self.cubin).hexdigest()

    @property
    def spec_fields(self) -> dict:
        """The spec as a dict (e.g. {"arch": "sm_90a", ...})."""
        return json.loads(self.spec)


def canonical_spec(spec) -> str:
    """`spec.to_json()` in the canonical form stored in entries (sorted keys, no spaces), for
    any object of the spec protocol."""
    return json.dumps(json.loads(spec.to_json()), sort_keys=True, separators=(",", ":"))


def seal(entry: Entry, secret: Optional[bytes] = None) -> Entry:
    """`entry` with `blob` set to its packed form (signed with `secret`)."""
    return dataclasses.replace(entry, blob=pack(entry, secret))


def pack(entry: Entry, secret: Optional[bytes] = None) -> bytes:
    header = json.dumps({
        "key": entry.key,
        "spec": json.loads(entry.spec),
        "compiler": entry.compiler,
        "flags": list(entry.flags),
        "symbol": entry.symbol,
        "created": entry.created,
        "compile_seconds": entry.compile_seconds,
        "cubin_sha256": entry.cubin_sha256,
        "size": len(entry.cubin),
    }, sort_keys=True, separators=(",", ":")).encode()
    prefix = _PREFIX.pack(MAGIC, FORMAT_VERSION, _SIGNED if secret else 0, len(header))
    body = prefix + header + entry.cubin
    blob = body + hashlib.sha256(body).digest()
    if secret:
        blob += hmac.new(secret, body, hashlib.sha256).digest()
    return blob


def read_header(blob: bytes) -> dict:
    """The JSON header alone, without verifying anything (for listings and cleanup reports)."""
    _, _, header_size = _read_prefix(blob)
    return _parse_header(blob, header_size)


def describe(blob: bytes) -> dict:
    """What listings keep about a blob, from its header alone (not verified): the spec (a
    dict), its arch, the compiler and the created time. The remote tier's meta hash and bundle
    manifests are made of these fields."""
    header = read_header(blob)
    spec = header.get("spec") or {}
    return {"spec": spec, "arch": spec.get("arch"), "compiler": header.get("compiler"),
            "created": header.get("created")}


def unpack(blob: bytes, expected_key: str, secret: Optional[bytes] = None) -> Entry:
    """Verify `blob` completely and return its Entry (holding `blob`); EntryError says what was
    wrong. The only place an entry is verified: callers pass the Entry on instead of calling
    this again."""
    _, flags, header_size = _read_prefix(blob)
    header = _parse_header(blob, header_size)
    size = header.get("size")
    if not isinstance(size, int) or size < 0:
        raise EntryError(f"header size field is {size!r}; expected a non-negative int")
    signed = bool(flags & _SIGNED)
    body_size = _PREFIX.size + header_size + size
    expected_length = body_size + _DIGEST_SIZE * (2 if signed else 1)
    if len(blob) != expected_length:
        raise EntryError(f"entry is {len(blob)} bytes; its header promises {expected_length} "
                         f"(truncated or padded)")
    body = blob[:body_size]
    checksum = blob[body_size:body_size + _DIGEST_SIZE]
    if not hmac.compare_digest(hashlib.sha256(body).digest(), checksum):
        raise EntryError("entry checksum mismatch (corrupted bytes)")
    if secret:
        if not signed:
            raise EntryError("entry is unsigned but DGEMM_CACHE_SECRET is set")
        tag = blob[body_size + _DIGEST_SIZE:]
        if not hmac.compare_digest(hmac.new(secret, body, hashlib.sha256).digest(), tag):
            raise EntryError("entry HMAC does not match DGEMM_CACHE_SECRET (signed with "
                             "another secret, or tampered with)")
    cubin = blob[_PREFIX.size + header_size:body_size]
    actual_sha = hashlib.sha256(cubin).hexdigest()
    if header.get("cubin_sha256") != actual_sha:
        raise EntryError(f"cubin sha256 is {actual_sha}; header says "
                         f"{header.get('cubin_sha256')}")
    if header.get("key") != expected_key:
        raise EntryError(f"entry is for key {header.get('key')}; expected {expected_key}")
    try:
        if not isinstance(header["spec"], dict):
            raise TypeError(f"spec is a {type(header['spec']).__name__}; expected an object")
        return Entry(key=header["key"],
                     spec=json.dumps(header["spec"], sort_keys=True, separators=(",", ":")),
                     compiler=header["compiler"], flags=tuple(header["flags"]),
                     symbol=header["symbol"], cubin=cubin, created=float(header["created"]),
                     compile_seconds=float(header["compile_seconds"]), blob=blob)
    except (KeyError, TypeError, ValueError) as error:
        raise EntryError(f"entry header is missing or mistypes a field: {error!r}") from error


def _read_prefix(blob: bytes) -> tuple:
    if len(blob) < _PREFIX.size:
        raise EntryError(f"entry is {len(blob)} bytes, shorter than its {_PREFIX.size}-byte "
                         f"prefix")
    magic, version, flags, header_size = _PREFIX.unpack_from(blob, 0)
    if magic != MAGIC:
        raise EntryError(f"bad magic {magic!r}; expected {MAGIC!r}")
    if version != FORMAT_VERSION:
        raise EntryError(f"entry format version {version}; this dgemm reads {FORMAT_VERSION}")
    if header_size > _MAX_HEADER or _PREFIX.size + header_size > len(blob):
        raise EntryError(f"header length {header_size} does not fit a {len(blob)}-byte entry")
    return version, flags, header_size


def _parse_header(blob: bytes, header_size: int) -> dict:
    raw = blob[_PREFIX.size:_PREFIX.size + header_size]
    try:
        header = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError) as error:
        raise EntryError(f"entry header is not JSON: {error}") from error
    if not isinstance(header, dict):
        raise EntryError(f"entry header is a {type(header).__name__}; expected an object")
    return header
