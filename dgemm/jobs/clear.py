"""`dgemm-cache clear`: empty the local disk cache, or (`--remote`) the Redis namespace.

Local: every entry goes, with the lock files nobody holds and the temp files of dead writers,
through gc's machinery (`cleanup.Cleaner` with a budget of 0 bytes), so it is safe while other
processes use the cache: an entry whose key is being compiled or published (its lock is held)
is skipped and reported, nothing but dgemm's own names is touched, and a directory that is not
a dgemm cache (no v1/) is refused (exit 2).

Remote: every key of the namespace (entries, index, meta, failure records, counters; SCAN +
DEL in batches, never KEYS), except live leases, which expire within their TTL. It empties the
store of the whole cluster, so it needs `--yes`: without it (or with `--dry-run`) it only says
what it would delete. Exit status: 0 done (or a dry run), 1 something could not be removed,
2 bad arguments, a directory that is not a dgemm cache or `--remote` without `--yes`, 3 the
remote is not configured or unreachable.
"""
from __future__ import annotations

import argparse
import json
import sys

from dgemm.jobs import cleanup

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_REMOTE = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """clear's own options; `--cache-dir` and `--remote` come from `dgemm-cache`."""
    parser.add_argument("--yes", action="store_true",
                        help="really delete the remote namespace's keys (needed with --remote)")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would be removed; change nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    from dgemm.jit import env
    from dgemm.jit.errors import ConfigError

    try:
        settings = env.Settings.from_env()
    except ConfigError as error:
        print(f"clear: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.remote:
        return clear_remote(settings, args)
    return clear_local(settings, args)


# --- local ---------------------------------------------------------------------------------
def clear_local(settings, args: argparse.Namespace) -> int:
    from dgemm.jit.tiers import DiskTier

    root = settings.cache_dir
    if not root.exists():
        print(f"clear: {root} does not exist, so there is nothing to clear; check --cache-dir "
              f"or DGEMM_CACHE_DIR", file=sys.stderr)
        return EXIT_USAGE
    everything = cleanup.Policy(max_bytes=0, max_age=None, stale_after=cleanup.MIN_STALE_AFTER,
                                dry_run=args.dry_run)
    try:
        report = cleanup.Cleaner(DiskTier(root, settings.secret), everything).run()
    except cleanup.CleanupError as error:
        print(f"clear: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(report, indent=2) if args.json else format_local(report))
    return EXIT_FAILED if report["errors"] else EXIT_OK


def format_local(report: dict) -> str:
    verb = "would remove" if report["dry_run"] else "removed"
    removed = report["removed"]
    entries = sum(removed[reason] for reason in ("corrupt", "evicted"))
    lines = [f"dgemm clear: {report['cache_dir']}: {verb} {entries} entries "
             f"({cleanup.format_size(report['bytes_freed'])}), {removed['temp_file']} temp "
             f"files, {removed['dead_lock']} lock files"]
    if report["skipped_locked"]:
        lines.append(f"  kept {len(report['skipped_locked'])} in use (their key is being "
                     f"compiled or published); run clear again later for them")
    if report["skipped_in_flight"]:
        lines.append(f"  kept {len(report['skipped_in_flight'])} temp files of live writers")
    lines += [f"  ERROR {error}" for error in report["errors"]]
    return "\n".join(lines)


# --- remote --------------------------------------------------------------------------------
def clear_remote(settings, args: argparse.Namespace) -> int:
    from dgemm.jit import remote

    tier = remote.tier_for(settings)
    if tier is None:
        print("clear: --remote needs the remote cache; set DGEMM_REMOTE_CACHE or pass "
              "--remote URL, e.g. redis://host:6379/0", file=sys.stderr)
        return EXIT_NO_REMOTE
    cache = tier.cache
    delete = args.yes and not args.dry_run
    found = cache.call(lambda: cache.store.clear(dry_run=not delete))
    report = {"remote": cache.breaker.name, "namespace": cache.namespace.prefix,
              "dry_run": not delete,
              "removed": {kind: count for kind, count in sorted(found.items())
                          if kind != "lease"},
              "leases_kept": found.get("lease", 0)}
    print(json.dumps(report, indent=2) if args.json else format_remote(report))
    if not delete and not args.dry_run:
        print("clear: nothing was deleted: --remote empties the store of every node, so it "
              "needs --yes (or --dry-run to only look)", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def format_remote(report: dict) -> str:
    verb = "would delete" if report["dry_run"] else "deleted"
    removed = report["removed"]
    counts = ", ".join(f"{count} {kind}" for kind, count in removed.items()) or "nothing"
    line = (f"dgemm clear: {report['remote']} [{report['namespace']}]: {verb} "
            f"{removed.get('entry', 0)} entries ({counts})")
    if report["leases_kept"]:
        line += f"; kept {report['leases_kept']} live leases (they expire on their own)"
    return line
