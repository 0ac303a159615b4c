"""`dgemm-cache`: inspect and move dgemm's kernel cache (local disk and the Redis remote tier).

    dgemm-cache stats [--json | --prometheus]   entries and bytes per tier, cluster counters
    dgemm-cache ls [--remote] [--json]          one line per kernel
    dgemm-cache verify [--remote] [--dry-run]   check every entry; remove the bad ones
    dgemm-cache push                            upload local entries Redis lacks
    dgemm-cache pull [--arch A] [--any-compiler]  download this node's entries Redis holds
    dgemm-cache export FILE [--remote]          write a verified bundle (air-gapped clusters)
    dgemm-cache import FILE [--push]            verify a bundle into the local cache
    dgemm-cache sync [--arch A] [--once]        per-node daemon: push, pull, follow (SIGTERM)
    dgemm-cache prewarm ...                     compile a workload's kernels ahead of time
    dgemm-cache tune ...                        time a workload's shape classes on this GPU and
                                                publish the autotuning decisions
    dgemm-cache gc [--remote] ...               keep the local cache (or Redis) within budget
    dgemm-cache clear [--remote --yes]          empty the local cache (or the Redis namespace)
    dgemm-cache doctor [--json]                 print and check the effective settings
                                                (alias: show-config)
    dgemm-cache --version

Configuration comes from the DGEMM_* environment (DGEMM_CACHE_DIR, DGEMM_REMOTE_CACHE,
DGEMM_REMOTE_NAMESPACE, DGEMM_CACHE_SECRET, ...). Every subcommand also takes, before or after
its name, `--cache-dir DIR` (for DGEMM_CACHE_DIR) and `--remote URL` (for DGEMM_REMOTE_CACHE;
`--remote none`: no remote) for that one command. On ls, verify, export, gc and clear a bare
`--remote` (or `--remote URL` after the subcommand) also makes Redis the cache they work on.
`--help` and `--version` import neither torch nor redis, so they answer at once.
Exit status, for scripts:
    0  success
    1  failure: some entry was bad, refused or could not be moved (see the report)
    2  usage: bad arguments, a malformed DGEMM_* variable or input file (manifest, bundle),
       an unusable or (given with --cache-dir) missing cache directory, an export FILE that
       is not a regular file, a gc directory that is not a dgemm cache
    3  the remote cache is needed but DGEMM_REMOTE_CACHE is unset, or Redis is unreachable
       or refuses the password (prewarm: the remote cache could not take every kernel)
    4  tune: no CUDA GPU here, or one whose kernels are not autotuned (not sm_90a)
  130  interrupted (prewarm: 130 for SIGINT, 143 for SIGTERM, after printing its report)
  141  stdout closed early (`dgemm-cache ls | head -1`): stopped quietly, like other tools
Every DGEMM_* variable and the local cache directory are checked before a command does any
work: a bad one is one message and exit 2.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Optional

from cache_service.errors import CacheServiceError, RemoteUnavailable
from dgemm import __version__
from dgemm.jit import compiler, env, remote
from dgemm.jit import entry as entry_format
from dgemm.jit.errors import CacheDirError, CompileError, ConfigError, DgemmError, EntryError
from dgemm.jit.tiers import DiskTier
from dgemm.jobs import bundle, clear, cleanup, doctor, prewarm, sync, tune
from dgemm.jobs.cleanup import format_size
from dgemm.jobs.manifest import ManifestError, check_arch
from dgemm.progress import Progress

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_REMOTE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_STDOUT_CLOSED = 128 + 13       # what a shell shows for a tool killed by SIGPIPE
EXIT_NO_GPU = tune.EXIT_NO_GPU


class _RemoteMissing(Exception):
    """The subcommand needs DGEMM_REMOTE_CACHE."""


# Bad input, whatever the subcommand: a setting, a file handed to it, a path to write: exit 2.
_USAGE_ERRORS = (ConfigError, bundle.BundleError, bundle.ExportTargetError, ManifestError,
                 cleanup.CleanupError)


def main(argv: Optional[list] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(name)s: %(message)s", stream=sys.stderr)
    try:
        status = _run(args)
        sys.stdout.flush()          # a reader that left shows up here, not at interpreter exit
        return status
    except BrokenPipeError:
        return _stdout_closed()


def _run(args) -> int:
    """The command, with every error it may raise turned into a message and an exit status."""
    try:
        with settings_from_options(args), _outage_said_once(args.verbose):
            preflight(args)
            return args.handler(args)
    except _USAGE_ERRORS as error:
        print(f"dgemm-cache: {error}", file=sys.stderr)
        return EXIT_USAGE
    except _RemoteMissing:
        print("dgemm-cache: this command needs the remote cache; set DGEMM_REMOTE_CACHE or "
              "pass --remote URL, e.g. redis://host:6379/0", file=sys.stderr)
        return EXIT_NO_REMOTE
    except RemoteUnavailable as error:
        print(f"dgemm-cache: the remote cache is unavailable: {error}", file=sys.stderr)
        return EXIT_NO_REMOTE
    except (DgemmError, CacheServiceError) as error:
        print(f"dgemm-cache: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("dgemm-cache: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


@contextlib.contextmanager
def _outage_said_once(verbose: bool):
    """Without -v, the circuit breaker's own warning about an unreachable Redis is held back
    for the command: the command says it (exit 3, or in its report), and the same failure
    twice on stderr reads like two problems. Restored afterwards, for callers in process."""
    breaker_log = logging.getLogger("dgemm.remote.breaker")
    level = breaker_log.level
    if not verbose:
        breaker_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        breaker_log.setLevel(level)


def _stdout_closed() -> int:
    """The reader of stdout has gone (`dgemm-cache ls | head -1`): stop quietly, as other Unix
    tools do. stdout is pointed at /dev/null first, so the interpreter's final flush of what
    is still buffered cannot fail again with a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass                        # stdout is not a file (an in-process capture)
    return EXIT_STDOUT_CLOSED


# How each command uses the local cache directory: "write" creates it (0700) and checks it is
# usable, "read" checks what exists, "clean" only that a --cache-dir given exists (gc checks
# the rest itself, first of all that it is a dgemm cache). prewarm checks its own (with the
# compiler); commands not listed here do not touch the local cache or check it themselves.
_CACHE_USE = {"stats": "read", "ls": "read", "verify": "read", "push": "read",
              "export": "read", "gc": "clean", "pull": "write", "import": "write",
              "sync": "write"}
# Commands that report the configuration, so a bad setting is their output, not an error.
_REPORT_CONFIG = ("doctor",)


def preflight(args) -> None:
    """Check the configuration once, before the command does any work: every DGEMM_* variable
    (a typo in DGEMM_LOCK_TIMEOUT fails now, not at the first lock wait) and the local cache
    directory the command uses. ConfigError (exit 2) with the fix."""
    for name in env.unknown_variables():
        print(f"dgemm-cache: warning: {name} is not a dgemm setting (a typo?); ignored",
              file=sys.stderr)
    if args.command in _REPORT_CONFIG:
        return
    settings = env.validate()
    use = _CACHE_USE.get(args.command)
    if use is None or getattr(args, "remote", None) is True:     # ls/verify/export --remote
        return
    explicit = getattr(args, "cache_dir", None)
    root = Path(explicit).expanduser() if explicit else settings.cache_dir
    if explicit and use != "write" and not os.path.lexists(root):
        raise ConfigError(f"no dgemm cache at {root}: the directory does not exist; check the "
                          f"--cache-dir path")
    if use == "clean":
        return
    disk = DiskTier(root, settings.secret)
    try:
        disk.ensure_dirs() if use == "write" else disk.check_private()
    except CacheDirError as error:
        raise ConfigError(str(error)) from error


@contextlib.contextmanager
def settings_from_options(args):
    """`--cache-dir` and `--remote URL` become DGEMM_CACHE_DIR and DGEMM_REMOTE_CACHE for the
    command (restored afterwards, for callers of `main` in process). Through the environment,
    not a Settings argument, so that every reader sees them: the command's own Settings, the
    jobs that read single variables, and prewarm's compile processes, which inherit it."""
    changes = {}
    if getattr(args, "cache_dir", None):
        changes["DGEMM_CACHE_DIR"] = args.cache_dir
    url = _remote_url_option(args)
    if url is not None:
        changes["DGEMM_REMOTE_CACHE"] = None if url == REMOTE_NONE else url
    saved = {name: os.environ.get(name) for name in changes}
    _set_environment(changes)
    try:
        yield
    finally:
        _set_environment(saved)


def _remote_url_option(args) -> Optional[str]:
    """The URL (or 'none') given by `--remote URL` after the subcommand, else before it. A
    subcommand whose `--remote` also picks Redis as the cache to work on keeps a plain True
    in args.remote for its body."""
    if isinstance(getattr(args, "remote", None), str):
        url, args.remote = args.remote, True
        return url
    return getattr(args, "remote_url", None)


def _set_environment(values: dict) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


REMOTE_NONE = "none"
# Subcommands whose `--remote` (bare) switches them from the local cache to Redis.
_REMOTE_TARGETS = ("ls", "verify", "export", "gc", "clear")
_TARGET_HELP = {
    "ls": "list Redis instead of local disk", "verify": "verify Redis instead of disk",
    "export": "export Redis instead of disk", "gc": "clean the Redis namespace instead of disk",
    "clear": "empty the Redis namespace instead of disk (needs --yes)",
}


def _remote_url(text: str) -> str:
    """argparse type of `--remote URL`: a Redis URL checked whole, or 'none'."""
    if text.strip().lower() == REMOTE_NONE:
        return REMOTE_NONE
    from cache_service.client import EXPECTED_FORMS, check_url, redact
    try:
        check_url(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{redact(text)!r} is not a usable Redis URL "
                                         f"({error}); expected {EXPECTED_FORMS}, or 'none' "
                                         f"for no remote") from None
    return text


def _add_settings_options(parser: argparse.ArgumentParser, name: Optional[str]) -> None:
    """-v, --cache-dir and --remote, on the top-level parser (name None) and on every
    subcommand. Defaults are SUPPRESSed, so a subcommand that is not given one keeps the
    value given before the subcommand."""
    quiet = argparse.SUPPRESS
    parser.add_argument("-v", "--verbose", action="store_true", default=quiet if name else False,
                        help="log progress at info level")
    parser.add_argument("--cache-dir", metavar="DIR", default=quiet,
                        help="the local cache for this command (instead of DGEMM_CACHE_DIR, "
                             "default ~/.cache/dgemm)")
    url_help = ("the Redis for this command, instead of DGEMM_REMOTE_CACHE; 'none' for no "
                "remote")
    if name in _REMOTE_TARGETS:
        parser.add_argument("--remote", nargs="?", const=True, default=False, type=_remote_url,
                            metavar="URL", help=f"{_TARGET_HELP[name]}; with URL, {url_help}")
    else:
        parser.add_argument("--remote", dest="remote_url", type=_remote_url, default=quiet,
                            metavar="URL", help=url_help)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dgemm-cache", description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 ok, 1 failure, 2 usage or settings, 3 remote cache unset or "
               "unreachable, 4 no GPU to tune on, 130 interrupted (143: prewarm's SIGTERM), 141 stdout closed; "
               "`dgemm-cache prewarm --help` details prewarm's",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"dgemm-cache {__version__}")
    _add_settings_options(parser, None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler, help: str, aliases=()) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, aliases=list(aliases))
        sub.set_defaults(handler=handler)
        _add_settings_options(sub, name)
        return sub

    stats = command("stats", cmd_stats, "entries and bytes per tier, and the cluster counters")
    output = stats.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON")
    output.add_argument("--prometheus", action="store_true",
                        help="print Prometheus text format (for a node exporter's textfile)")

    ls = command("ls", cmd_ls, "list cached kernels")
    ls.add_argument("--json", action="store_true", help="print JSON")

    verify = command("verify", cmd_verify, "verify every entry (digest, key, HMAC with a "
                                           "secret) and remove the bad ones")
    verify.add_argument("--dry-run", action="store_true", help="report only; remove nothing")
    _add_output_flags(verify)

    push = command("push", cmd_push, "upload local entries that Redis does not hold")
    _add_output_flags(push)

    pull = command("pull", cmd_pull, "download the entries for this node's arch and compiler")
    _add_match_flags(pull)
    _add_output_flags(pull)

    export = command("export", cmd_export, "write every verified entry into one bundle file")
    export.add_argument("file", help="bundle to write (a tar file)")
    _add_output_flags(export)

    imports = command("import", cmd_import, "verify a bundle's entries into the local cache")
    imports.add_argument("file", help="bundle written by `dgemm-cache export`")
    imports.add_argument("--push", action="store_true", help="also upload them to Redis")
    imports.add_argument("--json", action="store_true", help="print the report as JSON")

    sync = command("sync", cmd_sync, "per-node daemon: push local-only entries, pull this "
                                     "node's entries, then follow new publications until "
                                     "SIGTERM")
    _add_match_flags(sync)
    sync.add_argument("--once", action="store_true", help="push and pull once, then exit")
    sync.add_argument("--reconcile-every", type=float, default=300.0, metavar="SECONDS",
                      help="full push and pull interval, catching missed notifications "
                           "(default 300)")
    sync.add_argument("--json", action="store_true", help="print the final totals as JSON")

    for name, job, help in (("prewarm", prewarm, "compile a workload's kernels ahead of time, "
                                                  "without a GPU"),
                            ("tune", tune, "time a workload's shape classes on this GPU node "
                                           "and publish the autotuning decisions (needs a "
                                           "CUDA GPU: exit 4 without one)"),
                            ("gc", cleanup, "keep the local cache (or, with --remote, the Redis "
                                            "namespace) healthy and within budget"),
                            ("clear", clear, "remove every entry of the local cache (or, with "
                                             "--remote --yes, every key of the Redis "
                                             "namespace)")):
        sub = command(name, lambda args, job=job: job.run(args), help)
        job.add_arguments(sub)
    sub = command("doctor", doctor.run, "print the effective settings and check them (cache "
                                        "dir, remote, compiler, GPU)", aliases=["show-config"])
    doctor.add_arguments(sub)
    return parser


def _add_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _add_match_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", action="append", default=None, metavar="ARCH",
                        help="architecture to pull, repeatable (default: this node's GPU, "
                             "else sm_90a)")
    parser.add_argument("--any-compiler", action="store_true",
                        help="pull entries of every compiler, not only this node's")


# ------------------------------------------------------------------------------------------------
# Subcommands
# ------------------------------------------------------------------------------------------------
def cmd_stats(args) -> int:
    settings = env.Settings.from_env()
    disk = _disk(settings)
    local = [size for size in (_size_of(path) for _, path in disk.iter_entries())
             if size is not None]
    report = {"local": {"dir": str(disk.root), "exists": disk.root.is_dir(),
                        "entries": len(local), "bytes": sum(local)},
              "remote": None}
    status = EXIT_OK
    tier = _remote(settings, required=False)
    if tier is not None:
        cache = tier.cache
        shown = {"url": cache.breaker.name, "namespace": cache.namespace.prefix, "up": False}
        try:
            listing = cache.call(lambda: list(cache.store.iter_meta()))
            shown.update(up=True, entries=len(listing),
                         bytes=sum(_count_field(meta, "bytes") for _, meta, _ in listing),
                         counters=cache.call(cache.store.counters))
        except RemoteUnavailable as error:
            shown["error"] = str(error)
            status = EXIT_NO_REMOTE
        report["remote"] = shown
    if args.json:
        print(json.dumps(report, indent=2))
    elif args.prometheus:
        print(format_prometheus(report), end="")
    else:
        print(format_stats(report))
    return status


def cmd_ls(args) -> int:
    rows = []
    settings = env.Settings.from_env()
    if args.remote:
        cache = _remote(settings).cache
        for key, meta, last_use in cache.call(lambda: list(cache.store.iter_meta())):
            meta = meta if isinstance(meta, dict) else {}
            rows.append(_row(key, meta.get("spec"), meta.get("compiler"), meta.get("bytes"),
                             last_use))
    else:
        disk = _disk(settings)
        for key, path in disk.iter_entries():
            try:
                blob = disk.read_blob(key)
                header = entry_format.read_header(blob)
                stat = path.stat()
            except FileNotFoundError:
                continue                    # removed by gc or replaced meanwhile
            except (OSError, EntryError) as error:
                rows.append(_row(key, {}, f"unreadable: {error}", None, None))
                continue
            rows.append(_row(key, header.get("spec"), header.get("compiler"),
                             stat.st_size, stat.st_mtime))
    rows.sort(key=lambda row: (row["kernel"], row["gemm_type"], row["n"], row["k"], row["key"]))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_listing(rows))
    return EXIT_OK


def cmd_verify(args) -> int:
    report = {"checked": 0, "bad": [], "removed": 0, "where": "remote" if args.remote else "local"}
    settings = env.Settings.from_env()
    if args.remote:
        # Raw blobs, not `download`: verify reports every problem and removes nothing itself
        # on --dry-run, where a download would discard a refused blob.
        cache = _remote(settings).cache
        keys = [key for key, _, _ in cache.call(lambda: list(cache.store.iter_meta()))]
        progress = _progress("verify", len(keys), args)
        for key in keys:
            blob = cache.call(lambda: cache.client.get(cache.namespace.entry(key)))
            if blob is not None:
                report["checked"] += 1
                problem = _problem(blob, key, settings.secret)
                if problem:
                    report["bad"].append({"key": key, "problem": problem})
                    if not args.dry_run and cache.call(lambda: cache.store.discard(key, blob)):
                        report["removed"] += 1
            progress.advance(key[:12])
        progress.close()
        if not args.dry_run:
            report["stale_index_members_removed"] = cache.call(cache.store.prune)
    else:
        disk = _disk(settings)
        entries = list(disk.iter_entries())
        progress = _progress("verify", len(entries), args)
        for key, path in entries:
            try:
                problem = _problem(disk.read_blob(key), key, disk.secret)
            except FileNotFoundError:
                continue                    # removed by gc or replaced meanwhile
            except OSError as error:
                problem = f"unreadable: {error}"
            report["checked"] += 1
            if problem:
                report["bad"].append({"key": key, "problem": problem})
                if not args.dry_run:
                    disk.remove(key)
                    report["removed"] += 1
            progress.advance(key[:12])
        progress.close()
    _print_report(args, report, f"verified {report['checked']} {report['where']} entries: "
                                f"{len(report['bad'])} bad, {report['removed']} removed",
                  details=[f"  {bad['key'][:12]}  {bad['problem']}" for bad in report["bad"]])
    return EXIT_FAILED if report["bad"] else EXIT_OK


def cmd_push(args) -> int:
    settings = env.Settings.from_env()
    tier, disk = _remote(settings), _disk(settings)
    cache = tier.cache
    cache.call(cache.client.ping)   # a down Redis is exit 3 even with nothing to push
    total = sum(1 for _ in disk.iter_entries())
    progress = _progress("push", total, args)
    result = sync.push(tier, disk, progress=progress.advance)
    progress.close()
    return _print_transfer(args, "pushed", result)


def cmd_pull(args) -> int:
    settings = env.Settings.from_env()
    match = _match(args, settings)
    tier, disk = _remote(settings), _disk(settings)
    cache = tier.cache
    total = cache.call(cache.store.count_meta)
    progress = _progress("pull", total, args)
    result = sync.pull(tier, disk, match, progress=progress.advance)
    progress.close()
    return _print_transfer(args, "pulled", result)


def cmd_export(args) -> int:
    settings = env.Settings.from_env()
    if args.remote:
        tier = _remote(settings)
        keys = [key for key, _, _ in tier.cache.call(lambda: list(tier.cache.store.iter_meta()))]
        fetch = tier.download
    else:
        disk = _disk(settings)
        keys = sorted(key for key, _ in disk.iter_entries())
        fetch = disk.get
    unreadable = []

    def verified_entries():
        for key in keys:
            try:
                entry = fetch(key)          # verified by the tier; bad entries are removed
            except (EntryError, OSError):
                entry = None
            if entry is None:
                unreadable.append(key)
            else:
                yield entry

    progress = _progress("export", len(keys), args)
    try:
        report = bundle.export_bundle(args.file, verified_entries(), progress=progress.advance)
    finally:
        progress.close()
    refused = len(unreadable) + report.refused
    summary = {"file": args.file, "entries": report.entries, "bytes": report.bytes,
               "refused": refused, "unreadable": unreadable}
    _print_report(args, summary, f"exported {report.entries} entries ({format_size(report.bytes)}) "
                                 f"to {args.file}; {refused} refused",
                  details=[f"  refused {key[:12]}: unreadable or failed verification (see the "
                           f"warning above)" for key in unreadable])
    return EXIT_FAILED if refused else EXIT_OK


def cmd_import(args) -> int:
    settings = env.Settings.from_env()
    disk = _disk(settings)
    tier = _remote(settings) if args.push else None
    uploaded = []

    def accept(entry) -> None:
        disk.put(entry)
        if tier is not None:
            tier.put(entry)
            uploaded.append(entry.key)

    report = bundle.import_bundle(args.file, settings.secret, accept)
    summary = {"file": args.file, "entries": report.entries, "bytes": report.bytes,
               "refused": report.refused, "refusals": report.refusals,
               "pushed": len(uploaded)}
    _print_report(args, summary, f"imported {report.entries} entries ({format_size(report.bytes)}) "
                                 f"from {args.file}; {report.refused} refused"
                                 + (f"; {len(uploaded)} pushed" if args.push else ""),
                  details=[f"  refused {refused['key'][:12]} "
                           f"({refused['kernel'] or 'header unreadable'}): {refused['reason']}"
                           for refused in report.refusals])
    return EXIT_FAILED if report.refused else EXIT_OK


def cmd_sync(args) -> int:
    settings = env.Settings.from_env()
    match = _match(args, settings)
    tier, disk = _remote(settings), _disk(settings)
    if not args.verbose:
        logging.getLogger("dgemm.remote").setLevel(logging.INFO)
    agent = sync.SyncAgent(tier, disk, match, reconcile_s=args.reconcile_every)
    if args.once:
        agent.reconcile()           # Redis down: RemoteUnavailable, exit 3
    else:
        agent.run()                 # until SIGTERM or SIGINT, through Redis outages
    totals = agent.totals
    _print_report(args, dataclasses.asdict(totals),
                  f"sync: moved {totals.copied} entries ({format_size(totals.bytes)}), "
                  f"{totals.failed} failed")
    # A daemon stopped by a signal has done its job; a one-shot sync reports failures.
    return EXIT_FAILED if args.once and totals.failed else EXIT_OK


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------
def _disk(settings: env.Settings) -> DiskTier:
    return DiskTier(settings.cache_dir, settings.secret)


def _remote(settings: env.Settings, required: bool = True) -> Optional[remote.RemoteTier]:
    tier = remote.tier_for(settings)
    if tier is None and required:
        raise _RemoteMissing()
    return tier


def _match(args, settings: env.Settings):
    """Which remote entries this node wants. ConfigError for an --arch that is no arch, and
    for a compiler that is not there (its version is part of what is matched)."""
    try:
        archs = tuple(check_arch(arch) for arch in args.arch) if args.arch else None
    except ValueError as error:
        raise ConfigError(f"--arch: {error}") from None
    if args.any_compiler:
        identity = None
    else:
        try:
            identity = compiler.get_compiler(settings.compiler, settings.debug).identity
        except CompileError as error:
            raise ConfigError(f"{error} (or pass --any-compiler)") from error
    return sync.Match(archs=archs or (_this_node_arch(),), compiler=identity)


def _this_node_arch() -> str:
    """The arch dgemm compiles for on this node's first GPU; sm_90a on a GPU-less host."""
    import torch                    # here, not at the top: `--help` must not import torch

    from dgemm import utils
    if not torch.cuda.is_available():
        return "sm_90a"
    return utils.arch_for_capability(*torch.cuda.get_device_capability(0))


def _size_of(path) -> Optional[int]:
    try:
        return path.stat().st_size
    except OSError:
        return None                 # removed meanwhile, or unreadable: not counted


def _count_field(meta, name: str) -> int:
    """A non-negative int field of an unverified meta dict; 0 when absent or malformed."""
    value = meta.get(name) if isinstance(meta, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _problem(blob: bytes, key: str, secret) -> Optional[str]:
    try:
        entry_format.unpack(blob, key, secret)
    except EntryError as error:
        return str(error)
    return None


def _progress(label: str, total: int, args):
    return Progress(label, total, enabled=not getattr(args, "no_progress", False))


def _print_report(args, report: dict, line: str, details: tuple = ()) -> None:
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join([line, *details]))


def _print_transfer(args, verb: str, result) -> int:
    _print_report(args, dataclasses.asdict(result),
                  f"{verb} {result.copied} entries ({format_size(result.bytes)}); "
                  f"{result.present} already there, {result.skipped} for other archs or "
                  f"compilers, {result.failed} failed")
    return EXIT_FAILED if result.failed else EXIT_OK


def _row(key: str, spec, compiler, size, last_use) -> dict:
    """One listing row. Headers and Redis meta are read unverified, so every field is coerced
    to the type the listing prints and sorts by; anything else shows as '?' or '-'."""
    spec = spec if isinstance(spec, dict) else {}

    def text(value, default="?"):
        return value if isinstance(value, str) else default

    def number(value, default=None):
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return {"key": key, "kernel": text(spec.get("kernel")),
            "gemm_type": text(spec.get("gemm_type")),
            "n": number(spec.get("n"), 0), "k": number(spec.get("k"), 0),
            "groups": number(spec.get("num_groups")),
            "block": f"{number(spec.get('block_m'), '?')}x{number(spec.get('block_n'), '?')}",
            "stages": number(spec.get("num_stages")), "arch": text(spec.get("arch"), None),
            "compiler": text(compiler, None), "bytes": number(size),
            "last_used": last_use if _is_timestamp(last_use) else None}


def _is_timestamp(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and
            0 < value < 1e11)       # a unix time that time.localtime can print


def format_listing(rows: list) -> str:
    lines = [f"{'key':12}  {'kernel':17} {'type':18} {'n':>6} {'k':>6} {'block':>7} "
             f"{'stages':>6}  {'arch':7} {'compiler':11} {'bytes':>8}  last used"]
    for row in rows:
        used = (time.strftime("%Y-%m-%d %H:%M", time.localtime(row["last_used"]))
                if row["last_used"] else "-")
        lines.append(f"{row['key'][:12]}  {row['kernel']:17} {row['gemm_type']:18} "
                     f"{row['n']:>6} {row['k']:>6} {row['block']:>7} {row['stages'] or '-':>6}  "
                     f"{row['arch'] or '-':7} {row['compiler'] or '-':11} "
                     f"{row['bytes'] or 0:>8}  {used}")
    lines.append(f"{len(rows)} entries")
    return "\n".join(lines)


def format_stats(report: dict) -> str:
    local = report["local"]
    if local.get("exists", True):
        lines = [f"local   {local['dir']}: {local['entries']} entries, "
                 f"{format_size(local['bytes'])}"]
    else:
        lines = [f"local   {local['dir']}: no cache yet (the directory does not exist; the "
                 f"first compile, pull or import creates it)"]
    remote = report["remote"]
    if remote is None:
        lines.append("remote  not configured (DGEMM_REMOTE_CACHE is unset)")
    elif not remote["up"]:
        lines.append(f"remote  {remote['url']} [{remote['namespace']}]: unreachable "
                     f"({remote['error']})")
    else:
        counters = ", ".join(f"{name} {value}" for name, value in
                             sorted(remote["counters"].items())) or "no events yet"
        lines.append(f"remote  {remote['url']} [{remote['namespace']}]: {remote['entries']} "
                     f"entries, {format_size(remote['bytes'])}; {counters}")
    return "\n".join(lines)


def format_prometheus(report: dict) -> str:
    """Prometheus text exposition format (version 0.0.4)."""
    local, remote = report["local"], report["remote"]
    entries = [('tier="local"', local["entries"])]
    sizes = [('tier="local"', local["bytes"])]
    if remote and remote["up"]:
        entries.append(('tier="remote"', remote["entries"]))
        sizes.append(('tier="remote"', remote["bytes"]))
    out = []

    def metric(name: str, kind: str, help: str, samples: list) -> None:
        out.append(f"# HELP {name} {help}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            out.append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")

    metric("dgemm_cache_entries", "gauge", "Kernel entries held by the cache tier.", entries)
    metric("dgemm_cache_bytes", "gauge", "Bytes of kernel entries held by the cache tier.",
           sizes)
    if remote is not None:
        metric("dgemm_remote_up", "gauge", "Whether the remote cache answered (1) or not (0).",
               [("", 1 if remote["up"] else 0)])
        if remote["up"]:
            metric("dgemm_remote_events_total", "counter",
                   "Cluster-wide remote cache events (hits, misses, publishes, failures, "
                   "refused).",
                   [(f'event="{name}"', value) for name, value in
                    sorted(remote["counters"].items())])
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
