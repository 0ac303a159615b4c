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

`unpack` checks in an order that trusts nothing it has not checked: the prefix (magic, version,
known flags, a header of at most 1 MiB that fits), then the digests over the raw bytes (they
are the blob's last 32 bytes, or 64 when signed, over everything before them), and only then
parses the header (nesting bounded, every field of its JSON type) and checks that its size,
cubin digest and key agree with the bytes. Whatever the bytes, it raises EntryError and nothing
else; so do `read_header` and `describe`, which parse without verifying (for listings).

The JIT is generic: `Entry.spec` is the spec's canonical JSON (what `spec.to_json()` returned),
never a spec object, so this module knows no spec class. `unpack` is the one verification; the
Entry it returns keeps its blob, so tiers hand the verified Entry on (and re-publish its blob)
without verifying again. `seal` packs a fresh Entry and keeps the blob it made, unverified
because this process just built it.

A second kind of entry, the *decision* (a small JSON record, e.g. the kernel an autotuner picked
for a class of problems), has the same prefix, checksum and HMAC but its own magic
b"DGEMMDC\\0" and no cubin:

    prefix   magic b"DGEMMDC\\0" | u16 format version | u8 flags | u8 0 | u32 n
    header   n bytes of UTF-8 JSON: key, payload (an object), created
    checksum, [hmac]   as above

The magic is the first thing either `unpack` checks, so a decision can never be loaded as a
kernel nor a kernel as a decision (`seal_decision`, `unpack_decision`, `describe_decision`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math
import struct
import time
from typing import Optional

from .errors import EntryError

MAGIC = b"DGEMMKB\0"
DECISION_MAGIC = b"DGEMMDC\0"
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
    """The JSON header alone, without verifying the digests (for listings and cleanup reports).
    Its fields are checked for type, so a listing can use them as they are; a malformed blob
    raises EntryError and nothing else."""
    _, _, header_size = _read_prefix(blob)
    return _parse_header(blob, header_size)


def describe(blob: bytes) -> dict:
    """What listings keep about a blob, from its header alone (not verified): the spec (a
    dict), its arch (a str or None), the compiler and the created time. The remote tier's meta
    hash and bundle manifests are made of these fields. EntryError for a malformed blob."""
    header = read_header(blob)
    arch = header["spec"].get("arch")
    return {"spec": header["spec"], "arch": arch if isinstance(arch, str) else None,
            "compiler": header["compiler"], "created": header["created"]}


def unpack(blob: bytes, expected_key: str, secret: Optional[bytes] = None) -> Entry:
    """Verify `blob` completely and return its Entry (holding `blob`); EntryError (and nothing
    else) says what was wrong. The only place an entry is verified: callers pass the Entry on
    instead of calling this again.

    The digests come first, over the raw bytes: the checksum (and, with a secret, the HMAC)
    sit at the end of the blob, so they are checked before a byte of the header is parsed, and
    with a secret only its holders can make this function parse anything."""
    _, flags, header_size = _read_prefix(blob)
    body = _verified_body(blob, flags, header_size, secret)
    header = _parse_header(blob, header_size)
    size = header["size"]
    if len(body) != _PREFIX.size + header_size + size:
        raise EntryError(f"entry body is {len(body)} bytes; its header promises "
                         f"{_PREFIX.size + header_size + size} (truncated or padded)")
    cubin = bytes(body[_PREFIX.size + header_size:])
    actual_sha = hashlib.sha256(cubin).hexdigest()
    if header["cubin_sha256"] != actual_sha:
        raise EntryError(f"cubin sha256 is {actual_sha}; header says "
                         f"{_short(header['cubin_sha256'], quote=False)}")
    if header["key"] != expected_key:
        raise EntryError(f"entry is for key {_short(header['key'], quote=False)}; expected "
                         f"{expected_key}")
    return Entry(key=header["key"],
                 spec=json.dumps(header["spec"], sort_keys=True, separators=(",", ":")),
                 compiler=header["compiler"], flags=tuple(header["flags"]),
                 symbol=header["symbol"], cubin=cubin, created=float(header["created"]),
                 compile_seconds=float(header["compile_seconds"]), blob=blob)


# ------------------------------------------------------------------------------------------
# Decisions: small JSON records with the same integrity checks and their own magic
# ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Decision:
    key: str
    payload: str                 # canonical JSON of an object (sorted keys, no spaces)
    created: float
    blob: bytes = dataclasses.field(default=b"", repr=False, compare=False)

    @property
    def fields(self) -> dict:
        return json.loads(self.payload)


_DECISION_FIELDS = {"key": str, "payload": dict, "created": (int, float)}
# A decision names a kernel and a few timings; anything near the header bound is not one.
MAX_DECISION_BYTES = 64 << 10


def seal_decision(key: str, payload: dict, secret: Optional[bytes] = None,
                  created: Optional[float] = None) -> Decision:
    """A Decision for `key` holding `payload` (a JSON object), packed (signed with `secret`)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    created = time.time() if created is None else created
    header = json.dumps({"key": key, "payload": json.loads(canonical), "created": created},
                        sort_keys=True, separators=(",", ":")).encode()
    if len(header) > MAX_DECISION_BYTES:
        raise ValueError(f"decision for {key[:12]} is {len(header)} bytes; expected at most "
                         f"{MAX_DECISION_BYTES}")
    prefix = _PREFIX.pack(DECISION_MAGIC, FORMAT_VERSION, _SIGNED if secret else 0,
                          len(header))
    body = prefix + header
    blob = body + hashlib.sha256(body).digest()
    if secret:
        blob += hmac.new(secret, body, hashlib.sha256).digest()
    return Decision(key=key, payload=canonical, created=created, blob=blob)


def unpack_decision(blob: bytes, expected_key: str, secret: Optional[bytes] = None) -> Decision:
    """Verify a decision blob as `unpack` verifies an entry (magic, digests, HMAC with a
    secret, then the header's types and key); EntryError and nothing else."""
    _, flags, header_size = _read_prefix(blob, DECISION_MAGIC)
    if header_size > MAX_DECISION_BYTES:
        raise EntryError(f"decision header is {header_size} bytes; expected at most "
                         f"{MAX_DECISION_BYTES}")
    body = _verified_body(blob, flags, header_size, secret)
    if len(body) != _PREFIX.size + header_size:
        raise EntryError(f"decision body is {len(body)} bytes; its header promises "
                         f"{_PREFIX.size + header_size} (truncated or padded)")
    header = _parse_json_header(blob, header_size)
    _check_fields(header, _DECISION_FIELDS)
    _check_finite(header, "created")
    if header["key"] != expected_key:
        raise EntryError(f"decision is for key {_short(header['key'], quote=False)}; "
                         f"expected {expected_key}")
    return Decision(key=header["key"],
                    payload=json.dumps(header["payload"], sort_keys=True,
                                       separators=(",", ":")),
                    created=float(header["created"]), blob=blob)


def describe_decision(blob: bytes) -> dict:
    """The meta-hash fields of a decision blob, from its header alone (not verified)."""
    _, _, header_size = _read_prefix(blob, DECISION_MAGIC)
    header = _parse_json_header(blob, header_size)
    _check_fields(header, _DECISION_FIELDS)
    return {"kind": "decision", "created": header["created"]}


_KIND_HINT = {
    (DECISION_MAGIC, MAGIC): " (this is an autotuning decision, not a kernel)",
    (MAGIC, DECISION_MAGIC): " (this is a kernel entry, not a decision)",
}


def _verified_body(blob: bytes, flags: int, header_size: int,
                   secret: Optional[bytes]) -> memoryview:
    """Everything before the trailing digests, after checking them over the raw bytes."""
    signed = bool(flags & _SIGNED)
    trailer = _DIGEST_SIZE * (2 if signed else 1)
    if len(blob) < _PREFIX.size + header_size + trailer:
        raise EntryError(f"entry is {len(blob)} bytes, too short for its {header_size}-byte "
                         f"header and digests (truncated)")
    if secret and not signed:
        raise EntryError("entry is unsigned but DGEMM_CACHE_SECRET is set")
    view = memoryview(blob)
    body = view[:len(blob) - trailer]
    checksum = view[len(body):len(body) + _DIGEST_SIZE]
    if not hmac.compare_digest(hashlib.sha256(body).digest(), checksum):
        raise EntryError("entry checksum mismatch (corrupted bytes)")
    if secret:
        tag = view[len(body) + _DIGEST_SIZE:]
        if not hmac.compare_digest(hmac.new(secret, body, hashlib.sha256).digest(), tag):
            raise EntryError("entry HMAC does not match DGEMM_CACHE_SECRET (signed with "
                             "another secret, or tampered with)")
    return body


def _read_prefix(blob: bytes, magic_expected: bytes = MAGIC) -> tuple:
    if not isinstance(blob, (bytes, bytearray)):
        raise EntryError(f"entry is a {type(blob).__name__}; expected bytes")
    if len(blob) < _PREFIX.size:
        raise EntryError(f"entry is {len(blob)} bytes, shorter than its {_PREFIX.size}-byte "
                         f"prefix")
    magic, version, flags, header_size = _PREFIX.unpack_from(blob, 0)
    if magic != magic_expected:
        raise EntryError(f"bad magic {magic!r}; expected {magic_expected!r}"
                         + _KIND_HINT.get((magic, magic_expected), ""))
    if version != FORMAT_VERSION:
        raise EntryError(f"entry format version {version}; this dgemm reads {FORMAT_VERSION}")
    if flags & ~_SIGNED:
        raise EntryError(f"entry flags {flags:#x} has bits this dgemm does not know")
    if header_size > _MAX_HEADER or _PREFIX.size + header_size > len(blob):
        raise EntryError(f"header length {header_size} does not fit a {len(blob)}-byte entry")
    return version, flags, header_size


# Field -> the JSON types it may have (bool is excluded from the numbers below by hand).
_HEADER_FIELDS = {"key": str, "spec": dict, "compiler": str, "flags": list, "symbol": str,
                  "created": (int, float), "compile_seconds": (int, float),
                  "cubin_sha256": str, "size": int}
_MAX_NESTING = 16      # a header nests 2 deep (header -> spec); deeper is crafted


def _parse_header(blob: bytes, header_size: int) -> dict:
    """The header as a dict whose fields all have their types; EntryError otherwise. Bounded:
    the caller has bounded `header_size`, and nesting is refused before it can exhaust the
    stack."""
    header = _parse_json_header(blob, header_size)
    _check_fields(header, _HEADER_FIELDS)
    if header["size"] < 0:
        raise EntryError(f"entry header field 'size' is {header['size']}; expected >= 0")
    if not all(isinstance(flag, str) for flag in header["flags"]):
        raise EntryError(f"entry header field 'flags' is {_short(header['flags'])}; expected "
                         f"a list of strings")
    for field in ("created", "compile_seconds"):
        _check_finite(header, field)
    return header


def _parse_json_header(blob: bytes, header_size: int) -> dict:
    """The header's JSON object, nesting bounded; EntryError for anything else."""
    raw = bytes(blob[_PREFIX.size:_PREFIX.size + header_size])
    if _nesting(raw) > _MAX_NESTING:
        raise EntryError(f"entry header nests deeper than {_MAX_NESTING} levels (crafted)")
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise EntryError(f"entry header is not JSON: {error}") from error
    if not isinstance(header, dict):
        raise EntryError(f"entry header is a {type(header).__name__}; expected an object")
    return header


def _check_fields(header: dict, fields: dict) -> None:
    for field, types in fields.items():
        value = header.get(field)
        if not isinstance(value, types) or isinstance(value, bool):
            raise EntryError(f"entry header field {field!r} is {_short(value)}; expected "
                             f"{_type_names(types)}")


def _check_finite(header: dict, field: str) -> None:
    if not math.isfinite(_as_float(header[field])):
        raise EntryError(f"entry header field {field!r} is {_short(header[field])}; "
                         f"expected a finite number")


def _as_float(number) -> float:
    try:
        return float(number)
    except OverflowError:       # an int beyond float's range
        return math.inf


def _nesting(raw: bytes) -> int:
    """The deepest nesting of [ and { in `raw`, counting brackets inside strings too (which
    only overestimates, and no real header has many)."""
    if raw.count(b"[") + raw.count(b"{") <= _MAX_NESTING:
        return 0
    depth = deepest = 0
    for byte in raw:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number an entry holds")


def _short(value, quote: bool = True) -> str:
    """`value` for a message, cut short: a crafted header may hold a megabyte."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_names(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in types)
