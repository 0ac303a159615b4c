"""The cache key: sha256 over a canonical JSON of everything that shapes the cubin.

Inputs: the entry format, the spec (and its format version, see spec_format), the digest of the
generated source and every csrc/ file, the compiler's name and version, its flags and the target
arch. Never absolute paths, hostnames, ranks or device indices, so a CPU-only prewarm host and a
GPU rank compute the same key.
"""
from __future__ import annotations

import hashlib
import json
import sys

from . import entry, source as source_module


def key(spec, compiler, source=None) -> str:
    """64 hex digits. `source` defaults to `render(spec)`; pass it when already rendered."""
    if source is None:
        source = source_module.render(spec)
    payload = {
        "format": entry.FORMAT_VERSION,
        "spec_format": spec_format(spec),
        "spec": json.loads(spec.to_json()),
        "source": source.digest,
        "compiler": compiler.identity,
        "flags": list(compiler.flags(spec)),
        "arch": spec.arch,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def spec_format(spec) -> int:
    """The version of the spec's field meanings: `spec.FORMAT_VERSION` if the spec class has
    one, else the `FORMAT_VERSION` of the module that defines the spec's class (e.g.
    dgemm.kernels.spec). Read from the spec, so the JIT imports no spec module."""
    version = getattr(spec, "FORMAT_VERSION", None)
    if version is None:
        version = getattr(sys.modules.get(type(spec).__module__), "FORMAT_VERSION", None)
    if not isinstance(version, int):
        raise TypeError(f"cannot key spec {spec!r}: expected an int FORMAT_VERSION on its class "
                        f"or in module {type(spec).__module__}; got {version!r}. Define "
                        f"FORMAT_VERSION (bump it when a spec field's meaning changes).")
    return version
