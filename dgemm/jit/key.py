"""The cache key: sha256 over a canonical JSON of everything that shapes the cubin.

Inputs: the entry format, the spec (and the heuristics' spec-format version), the digest of the
generated source and every csrc/ file, the compiler's name and version, its flags and the target
arch. Never absolute paths, hostnames, ranks or device indices, so a CPU-only prewarm host and a
GPU rank compute the same key.
"""
from __future__ import annotations

import hashlib
import json

from .. import heuristics
from . import entry, source as source_module


def key(spec, compiler, source=None) -> str:
    """64 hex digits. `source` defaults to `render(spec)`; pass it when already rendered."""
    if source is None:
        source = source_module.render(spec)
    payload = {
        "format": entry.FORMAT_VERSION,
        "spec_format": heuristics.FORMAT_VERSION,
        "spec": json.loads(spec.to_json()),
        "source": source.digest,
        "compiler": compiler.identity,
        "flags": list(compiler.flags(spec)),
        "arch": spec.arch,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
