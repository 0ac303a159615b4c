"""`dgemm-cache doctor` (alias `show-config`): print the effective settings and check them.

One line per check: dgemm's version; the local cache directory (exists, a dgemm cache, private,
writable, how many entries; a missing one must be creatable; named with DG_JIT_CACHE_DIR when
that variable, not DGEMM_CACHE_DIR, set it); the HMAC secret (set or not: its
value is never printed); the remote (URL with its password redacted, namespace, numbers, and
whether it answers a PING within DGEMM_REMOTE_TIMEOUT); the compiler and its version (NVRTC
loadable or nvcc found); this host's GPU (arch and SM count, through torch; a host without one
is fine for prewarm and the cache commands); DGEMM_DISABLE_JIT, DGEMM_LOCK_TIMEOUT and
DGEMM_JIT_DEBUG.

Each check ends "ok", "info" (nothing to check), "warn" (works, but read the note), "fail" or
"bad" (a malformed DGEMM_* variable). Exit status: 0 when nothing failed, 1 when a check failed,
2 when a setting is malformed.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Callable

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
OK, INFO, WARN, FAIL, BAD = "ok", "info", "warn", "fail", "bad"


@dataclasses.dataclass
class Check:
    name: str
    status: str
    value: str              # what is configured / found
    detail: str = ""        # why it failed, or what to do


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")


def run(args: argparse.Namespace) -> int:
    checks = [_guarded(name, check) for name, check in CHECKS]
    status = exit_status(checks)
    if args.json:
        print(json.dumps({"healthy": status == EXIT_OK, "exit_status": status,
                          "checks": [dataclasses.asdict(c) for c in checks]}, indent=2))
    else:
        print(format_checks(checks, status))
    return status


def exit_status(checks: list) -> int:
    statuses = {check.status for check in checks}
    return EXIT_USAGE if BAD in statuses else EXIT_FAILED if FAIL in statuses else EXIT_OK


def format_checks(checks: list, status: int) -> str:
    width = max(len(check.name) for check in checks)
    lines = []
    for check in checks:
        lines.append(f"{check.status:<5} {check.name:<{width}}  {check.value}")
        if check.detail:
            lines.append(f"      {'':<{width}}  {check.detail}")
    lines.append({EXIT_OK: "healthy", EXIT_FAILED: "a check failed (exit 1)",
                  EXIT_USAGE: "a setting is malformed (exit 2)"}[status])
    return "\n".join(lines)


def _guarded(name: str, check: Callable[[], Check]) -> Check:
    """Run one check: a malformed setting is "bad"; anything unforeseen is a failure of this
    check only, never a traceback that hides the others."""
    from dgemm.jit.errors import ConfigError
    try:
        return check()
    except ConfigError as error:
        return Check(name, BAD, "malformed setting", str(error))
    except Exception as error:          # noqa: BLE001 -- reported, not raised: see docstring
        return Check(name, FAIL, "could not be checked", f"{type(error).__name__}: {error}")


# --- the checks ----------------------------------------------------------------------------------
def check_version() -> Check:
    from dgemm import __version__
    return Check("dgemm", OK, f"{__version__} (python {sys.version.split()[0]}, "
                              f"{Path(__file__).resolve().parent.parent})")


def check_cache_dir() -> Check:
    from dgemm.jit import env
    root = env.cache_dir()
    if not os.path.lexists(root):
        return _missing_cache_dir(root)
    from dgemm.jit.errors import CacheDirError
    from dgemm.jit.tiers import DiskTier
    from dgemm.jobs import cleanup

    disk = DiskTier(root)
    try:
        cleanup.check_cache_dir(root)
        disk.check_private()
    except (cleanup.CleanupError, CacheDirError) as error:
        return Check("cache dir", FAIL, str(root), str(error))
    if not os.access(root, os.W_OK | os.X_OK):
        return Check("cache dir", FAIL, str(root), "not writable by this user: fix its "
                     "permissions, or set DGEMM_CACHE_DIR (or --cache-dir) to a writable "
                     "node-local directory")
    entries = sum(1 for _ in disk.iter_entries())
    return Check("cache dir", OK, f"{root}: {entries} entries, private, writable"
                 + _cache_dir_source())


def _cache_dir_source() -> str:
    """Where the root came from, when that is not DGEMM_CACHE_DIR."""
    from dgemm.jit import env
    source = env.cache_dir_source()
    return {"DGEMM_CACHE_DIR": "", "default": ""}.get(
        source, f" (from {source}: DGEMM_CACHE_DIR is unset)")


def _missing_cache_dir(root: Path) -> Check:
    """A cache dir that does not exist yet is fine if it can be created on first use."""
    parent = root.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if os.access(parent, os.W_OK | os.X_OK):
        return Check("cache dir", OK, f"{root}: does not exist yet; created (0700) on first use"
                     + _cache_dir_source())
    return Check("cache dir", FAIL, str(root),
                 f"does not exist and cannot be created ({parent} is not writable by this "
                 f"user); set DGEMM_CACHE_DIR (or --cache-dir) to a writable node-local "
                 f"directory")


def check_secret() -> Check:
    from dgemm.jit import env
    secret = env.cache_secret()                 # never printed, only whether it is there
    if secret is None:
        return Check("secret", INFO, "not set: entries are checked by digest, not signed",
                     "set DGEMM_CACHE_SECRET or DGEMM_CACHE_SECRET_FILE to sign and "
                     "authenticate entries")
    source = env.get_str("DGEMM_CACHE_SECRET_FILE")
    return Check("secret", OK, f"set (from DGEMM_CACHE_SECRET_FILE={source})" if source
             else "set (from DGEMM_CACHE_SECRET)")


def check_remote() -> Check:
    from dgemm.jit import env
    url = env.remote_cache()
    if url is None:
        return Check("remote", INFO, "not configured (DGEMM_REMOTE_CACHE is unset): each node "
                                     "compiles what its local disk lacks")
    from cache_service import client as redis_client
    from cache_service.namespace import Namespace
    namespace, numbers = env.remote_namespace(), env.remote_settings()
    shown = f"{redis_client.redact(url)} [namespace {namespace}]"
    connection = redis_client.connect(url, numbers.timeout_s)
    try:
        try:
            connection.ping()
        except Exception as error:      # refused, timed out, refused our password, not Redis
            return Check("remote", FAIL, shown, f"cannot be used (every call is bounded by "
                                                f"DGEMM_REMOTE_TIMEOUT={numbers.timeout_s:g} s): "
                                                f"{type(error).__name__}: {error}")
        version = connection.info("server").get("redis_version", "?")
        entries = connection.hlen(Namespace(namespace).meta)
        primary = getattr(connection.connection_pool, "master_address", None)   # Sentinel
    finally:
        connection.close()
    lifetime = (f"entries live {numbers.entry_ttl_s:g} s unless used" if numbers.entry_ttl_s
                else "entries kept until gc --remote")
    return Check("remote", OK, f"{shown}: reachable"
                 + (f" (primary {primary[0]}:{primary[1]})" if primary else "")
                 + f", Redis {version}, {entries} entries listed; timeout "
                   f"{numbers.timeout_s:g} s, lease TTL {numbers.lease_ttl_s:g} s, {lifetime}")


def check_compiler() -> Check:
    from dgemm.jit import compiler, env
    name, debug = env.jit_compiler(), env.jit_debug()
    try:
        identity = compiler.get_compiler(name, debug).identity
    except Exception as error:          # NVRTC missing, nvcc not found or unusable
        severity = WARN if env.disable_jit() else FAIL
        return Check("compiler", severity, f"{name}: unusable",
                     f"{type(error).__name__}: {error}"
                     + (" (DGEMM_DISABLE_JIT is set, so this node compiles nothing)"
                        if severity == WARN else ""))
    where = f", {compiler.find_nvcc()}" if name == "nvcc" else ""
    return Check("compiler", OK, f"{identity}{where}" + (" with line info (DGEMM_JIT_DEBUG)"
                                                          if debug else ""))


def check_gpu() -> Check:
    try:
        import torch
    except Exception as error:
        return Check("gpu", WARN, "torch cannot be imported", f"{type(error).__name__}: {error}")
    if not torch.cuda.is_available():
        return Check("gpu", INFO, "none visible (fine for prewarm and the cache commands; "
                                  "pass prewarm --arch and --num-sms for the GPUs that will run)")
    from dgemm import utils
    count = torch.cuda.device_count()
    properties = torch.cuda.get_device_properties(0)
    arch = utils.arch_for_capability(properties.major, properties.minor)
    return Check("gpu", OK, f"{count} x {properties.name}: arch {arch}, "
                            f"{properties.multi_processor_count} SMs (prewarm --arch {arch} "
                            f"--num-sms {properties.multi_processor_count})")


def check_disable_jit() -> Check:
    from dgemm.jit import env
    if env.disable_jit():
        return Check("DGEMM_DISABLE_JIT", INFO, "1: only kernels already cached may run "
                                               "(prewarm them first)")
    return Check("DGEMM_DISABLE_JIT", INFO, "0: missing kernels are compiled")


def check_lock_timeout() -> Check:
    from dgemm.jit import env
    return Check("DGEMM_LOCK_TIMEOUT", INFO, f"{env.lock_timeout():g} s")


CHECKS = (("dgemm", check_version), ("cache dir", check_cache_dir), ("secret", check_secret),
          ("remote", check_remote), ("compiler", check_compiler), ("gpu", check_gpu),
          ("DGEMM_DISABLE_JIT", check_disable_jit), ("DGEMM_LOCK_TIMEOUT", check_lock_timeout))

