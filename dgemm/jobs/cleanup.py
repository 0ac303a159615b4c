"""`dgemm-cache gc`: keep one node's disk cache healthy and within budget (cron or systemd).

In order: drop temp files of dead writers and unheld lock files older than `--stale-after`,
verify every entry and remove the corrupt ones, remove entries of compilers other than the one
this node uses, then remove entries unused for longer than `--max-age` and evict the least
recently used (by mtime, which a hit refreshes) until the entries fit in `--max-bytes`.

gc touches only dgemm's own names: `tmp/<key>.<pid>.<8 hex>.tmp`, `locks/<key>.lock` and
`v1/<key[:2]>/<key>.kbin` (key: 64 hex digits); anything else in the directory is left alone.
It refuses (exit 2) a directory that exists but is neither empty nor laid out by dgemm (no
`v1/` directory), so `--cache-dir ~` is an error, not a cleaning. A temp file is removed only
when the process named by the pid in its name is gone (a live process that started after the
file was last changed has only reused the pid), it is older than `--stale-after` (at least 60 s)
and its key's lock is free: a publish in flight is never cut off.

An entry is removed only while holding its per-key lock, taken without waiting: a held lock
means a process is compiling or publishing that key, so the entry is skipped. Under the lock the
file must still be the one that was judged (same inode, size and mtime), so an entry replaced
or used in the meantime survives. `--dry-run` takes no lock and changes nothing; it reports what
would go. Exit status: 0 on success (skips included), 1 when something could not be read or
removed, 2 for bad arguments or a directory that is not a dgemm cache.

`gc --remote` does the same housekeeping for the Redis namespace (`RemoteCleaner`): entries
unused for longer than `--max-age` go, then the least recently used (the index's last-use
scores) until the blobs fit in `--max-bytes`. Each removal is one script that deletes blob,
index and meta members together, and only if the entry is unchanged since it was listed (same
size, same last use): one used or republished meanwhile survives. An entry the index has no
last use for (the index was deleted, e.g. to repair it) counts as used now: never expired,
evicted last. Exit 3 when the remote is not configured or unreachable.
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import functools
import json
import math
import os
import re
import stat as stat_module
import sys
import time
from pathlib import Path

import filelock

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_REMOTE = 0, 1, 2, 3
REASONS = ("temp_file", "dead_lock", "corrupt", "other_compiler", "expired", "evicted")
# A publish writes, fsyncs and renames its temp file within moments; a minute is far beyond
# that, so no shorter --stale-after can make sense, and 0 would cut publishes off.
MIN_STALE_AFTER = 60.0
# dgemm's own names (tiers.DiskTier): gc never touches anything else.
_TEMP_NAME = re.compile(r"^(?P<key>[0-9a-f]{64})\.(?P<pid>[0-9]{1,10})\.[0-9a-f]{8}\.tmp$")
_LOCK_NAME = re.compile(r"^[0-9a-f]{64}\.lock$")
# How much later than a temp file's last change its writer's pid may have been taken by a new
# process before that process counts as someone else (slack for clock steps and for the
# one-second resolution of the boot time).
_PID_REUSE_SLACK = 60.0


class CleanupError(ValueError):
    """gc refuses its settings or the directory it was pointed at; the message says the fix."""


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """gc's own options; `--cache-dir` (and `dgemm-cache`'s `--remote`) come from the caller."""
    parser.add_argument("--max-bytes", type=parse_size, default=parse_size("10G"), metavar="SIZE",
                        help="evict least recently used entries down to this size, e.g. 500M, "
                             "10G, or 'none' (default 10G)")
    parser.add_argument("--max-age", type=parse_age, default=parse_age("30d"), metavar="AGE",
                        help="remove entries unused for longer than this, with a unit: e.g. "
                             "12h, 30d, or 'none' (default 30d)")
    parser.add_argument("--stale-after", type=_stale_age, default=3600.0, metavar="AGE",
                        help="age after which temp files of dead writers and unheld lock files "
                             "are removed, with a unit, at least 60s (default 1h; local only)")
    parser.add_argument("--keep-other-compilers", action="store_true",
                        help="keep entries built by another compiler or compiler version "
                             "(local only: the remote serves every node's compiler)")
    parser.add_argument("--dry-run", action="store_true",
                        help="report what would be removed; change nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cleanup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", metavar="DIR", default=None,
                        help="the cache to clean (default: DGEMM_CACHE_DIR, else ~/.cache/dgemm); "
                             "must be a dgemm cache (holding v1/) or empty")
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    if getattr(args, "remote", False):
        return run_remote(args)
    from dgemm.jit import env
    from dgemm.jit.errors import ConfigError
    from dgemm.jit.tiers import DiskTier

    try:
        cache_dir = getattr(args, "cache_dir", None)
        root = Path(cache_dir).expanduser() if cache_dir else env.cache_dir()
        secret = env.cache_secret()
        policy = Policy(max_bytes=args.max_bytes, max_age=args.max_age,
                        stale_after=args.stale_after, dry_run=args.dry_run,
                        compiler=None if args.keep_other_compilers else _current_compiler())
        report = Cleaner(DiskTier(root, secret), policy).run()
    except (CleanupError, ConfigError) as exc:     # ConfigError: a malformed DGEMM_* variable
        print(f"gc: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return EXIT_FAILED if report["errors"] else EXIT_OK


def run_remote(args: argparse.Namespace) -> int:
    """`gc --remote`: RemoteUnavailable (exit 3 in dgemm-cache) when Redis does not answer."""
    from dgemm.jit import env, remote
    from dgemm.jit.errors import ConfigError

    try:
        tier = remote.tier_for(env.Settings.from_env())
        policy = Policy(max_bytes=args.max_bytes, max_age=args.max_age,
                        stale_after=args.stale_after, dry_run=args.dry_run)
    except (CleanupError, ConfigError) as exc:
        print(f"gc: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if tier is None:
        print("gc: --remote needs the remote cache; set DGEMM_REMOTE_CACHE or pass "
              "--remote URL, e.g. redis://host:6379/0", file=sys.stderr)
        return EXIT_NO_REMOTE
    report = RemoteCleaner(tier.cache, policy).run()
    print(json.dumps(report, indent=2) if args.json else format_remote_report(report))
    return EXIT_OK


def check_cache_dir(root: Path) -> None:
    """CleanupError unless `root` is missing, empty, or laid out by dgemm (it holds v1/, which
    the disk tier creates with locks/ and tmp/). gc deletes only dgemm's names anyway; this
    catches a wrong --cache-dir before it touches anything."""
    try:
        mode = os.stat(root).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CleanupError(f"cannot inspect cache directory {root}: {exc.strerror or exc}") \
            from exc
    if not stat_module.S_ISDIR(mode):
        raise CleanupError(f"{root} is not a directory, so not a dgemm cache; pass the "
                           f"directory DGEMM_CACHE_DIR names (default ~/.cache/dgemm)")
    if (root / "v1").is_dir():
        return
    try:
        empty = not any(os.scandir(root))
    except OSError as exc:
        raise CleanupError(f"cannot list {root}: {exc.strerror or exc}") from exc
    if not empty:
        raise CleanupError(f"{root} is not a dgemm cache (it has no v1/ directory) and is not "
                           f"empty; refusing to clean it. Pass the directory DGEMM_CACHE_DIR "
                           f"names (default ~/.cache/dgemm)")


# ------------------------------------------------------------------------------------------
# The cleaner
# ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Policy:
    max_bytes: int | None           # None: no size budget
    max_age: float | None           # seconds; None: no age limit
    stale_after: float              # seconds (>= MIN_STALE_AFTER) before a temp file of a dead
                                    # writer or an unheld lock file is removed
    dry_run: bool = False
    # "name version" of the compiler this node uses; entries of others are removed. None keeps
    # them. A str starting with "?" means it could not be determined (check skipped).
    compiler: str | None = None

    def __post_init__(self):
        if not (isinstance(self.stale_after, (int, float)) and
                MIN_STALE_AFTER <= self.stale_after < math.inf):
            raise CleanupError(f"stale_after must be at least {MIN_STALE_AFTER:g} seconds; got "
                               f"{self.stale_after!r} (a shorter one could remove the temp file "
                               f"of a publish in flight)")
        if self.max_age is not None and not 0 <= self.max_age < math.inf:
            raise CleanupError(f"max_age must be a finite number of seconds >= 0 or None; got "
                               f"{self.max_age!r}")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise CleanupError(f"max_bytes must be >= 0 or None; got {self.max_bytes!r}")


@dataclasses.dataclass
class _Scanned:
    key: str
    path: Path
    stat: os.stat_result


class Cleaner:
    """One pass over a DiskTier's directory; `run()` returns the report dict, or raises
    CleanupError for a directory that is not a dgemm cache."""

    def __init__(self, disk, policy: Policy, now: float | None = None):
        self.disk, self.policy = disk, policy
        self.now = time.time() if now is None else now
        self.actions: list[dict] = []
        self.skipped_locked: list[str] = []
        self.skipped_in_flight: list[str] = []
        self.errors: list[str] = []

    def run(self) -> dict:
        check_cache_dir(self.disk.root)
        self._remove_stale_temp_files()
        self._remove_dead_locks()
        entries = self._scan_entries()
        if entries and not self.policy.dry_run:
            # Removals lock each key; recreate locks/ if someone deleted it.
            try:
                self.disk.locks_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                self.errors.append(f"cannot create {self.disk.locks_dir}: {exc}")
        before = (len(entries), sum(e.stat.st_size for e in entries))
        entries = [e for e in entries if not self._judge(e)]
        if self.policy.max_age is not None:
            cutoff = self.now - self.policy.max_age
            entries = [e for e in entries
                       if not (e.stat.st_mtime < cutoff and self._remove_entry(e, "expired"))]
        if self.policy.max_bytes is not None:
            entries = self._evict_to_budget(entries, self.policy.max_bytes)
        return self._report(before, (len(entries), sum(e.stat.st_size for e in entries)))

    # --- temp files and locks ----------------------------------------------------------------
    def _is_stale(self, stat: os.stat_result) -> bool:
        return self.now - stat.st_mtime > self.policy.stale_after

    def _remove_stale_temp_files(self) -> None:
        for path, stat in _regular_files(self.disk.tmp_dir, _TEMP_NAME, self.errors):
            if not self._is_stale(stat):
                continue
            name = _TEMP_NAME.match(path.name)
            if writer_may_be_alive(int(name["pid"]), stat.st_ctime):
                self.skipped_in_flight.append(str(path))
            elif _is_held(self.disk.lock_path(name["key"])):
                # Its key is being built here: leave the key's files to the holder.
                self.skipped_locked.append(str(path))
            else:
                self._act("temp_file", path, stat.st_size, path.unlink)

    def _remove_dead_locks(self) -> None:
        for path, stat in _regular_files(self.disk.locks_dir, _LOCK_NAME, self.errors):
            if not self._is_stale(stat):
                continue
            if self.policy.dry_run:
                if _is_held(path):
                    self.skipped_locked.append(str(path))
                else:
                    self._act("dead_lock", path, 0, None)
                continue
            lock = filelock.FileLock(str(path), mode=0o600)
            try:
                lock.acquire(timeout=0)
            except filelock.Timeout:
                self.skipped_locked.append(str(path))
                continue
            except OSError as exc:
                self.errors.append(f"cannot take lock {path}: {exc}")
                continue
            try:
                # Unlinking while holding it is safe: filelock waiters that were queued on this
                # inode see it has no name any more and retry on a fresh file. (Releases that
                # do not re-check could let two processes compile one key; publishing is
                # atomic, so the worst case is a wasted compile.)
                self._act("dead_lock", path, 0, path.unlink)
            finally:
                lock.release()

    # --- entries ------------------------------------------------------------------------------
    def _scan_entries(self) -> list[_Scanned]:
        scanned = []
        try:
            for key, path in self.disk.iter_entries():
                stat = _lstat(path)
                if stat is not None:     # a non-file here is judged (and removed) as corrupt
                    scanned.append(_Scanned(key, path, stat))
        except OSError as exc:
            self.errors.append(f"cannot list entries under {self.disk.entries_dir}: {exc}")
        return scanned

    def _judge(self, scanned: _Scanned) -> bool:
        """Verify one entry; remove it if corrupt or from another compiler. True if removed."""
        from dgemm.jit import entry as entry_format
        from dgemm.jit.errors import EntryError
        from dgemm.jit.safe_files import UnsafeFileError

        try:
            blob = self.disk.read_blob(scanned.key)
        except FileNotFoundError:
            return True                     # removed by someone else since the scan
        except UnsafeFileError as exc:
            return self._remove_entry(scanned, "corrupt", detail=str(exc))
        except OSError as exc:
            self.errors.append(f"cannot read {scanned.path}: {exc}")
            return False
        try:
            entry = entry_format.unpack(blob, scanned.key, self.disk.secret)
        except EntryError as exc:
            return self._remove_entry(scanned, "corrupt", detail=str(exc))
        wanted = self.policy.compiler
        if wanted and not wanted.startswith("?") and entry.compiler != wanted:
            return self._remove_entry(scanned, "other_compiler",
                                      detail=f"built by {entry.compiler}; this node uses {wanted}")
        return False

    def _evict_to_budget(self, entries: list[_Scanned], budget: int) -> list[_Scanned]:
        total = sum(e.stat.st_size for e in entries)
        kept = []
        for scanned in sorted(entries, key=lambda e: e.stat.st_mtime):   # oldest use first
            if total > budget and self._remove_entry(scanned, "evicted"):
                total -= scanned.stat.st_size
            else:
                kept.append(scanned)
        return kept

    def _remove_entry(self, scanned: _Scanned, reason: str, detail: str = "") -> bool:
        """Remove one entry under its per-key lock; False if the lock is held or the file
        changed since it was judged."""
        lock_path = self.disk.lock_path(scanned.key)
        if not _is_plain_or_missing(lock_path):
            self.errors.append(f"lock path {lock_path} is not a regular file; not removing "
                               f"{scanned.path} ({reason})")
            return False
        if self.policy.dry_run:
            if _is_held(lock_path):
                self.skipped_locked.append(str(scanned.path))
                return False
            return self._act(reason, scanned.path, scanned.stat.st_size, None, detail)
        lock = filelock.FileLock(str(lock_path), mode=0o600)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            self.skipped_locked.append(str(scanned.path))
            return False
        except OSError as exc:
            self.errors.append(f"cannot take lock {lock_path}: {exc}")
            return False
        try:
            current = _lstat(scanned.path)
            if current is None:
                return True                 # already gone
            if _identity(current) != _identity(scanned.stat):
                return False                # republished or used since we looked: keep it
            removed = self._act(reason, scanned.path, current.st_size, scanned.path.unlink,
                                detail)
            # The lock file was only needed to guard this removal.
            _unlink_quietly(lock_path)
            return removed
        finally:
            lock.release()

    # --- bookkeeping ----------------------------------------------------------------------------
    def _act(self, reason: str, path: Path, size: int, remove, detail: str = "") -> bool:
        """Record one removal, performing it unless this is a dry run."""
        if remove is not None and not self.policy.dry_run:
            try:
                remove()
            except FileNotFoundError:
                return True
            except OSError as exc:
                self.errors.append(f"cannot remove {path} ({reason}): {exc}")
                return False
        action = {"reason": reason, "path": str(path), "bytes": size}
        if detail:
            action["detail"] = detail
        self.actions.append(action)
        return True

    def _report(self, before: tuple, after: tuple) -> dict:
        removed = {reason: 0 for reason in REASONS}
        for action in self.actions:
            removed[action["reason"]] += 1
        entry_reasons = ("corrupt", "other_compiler", "expired", "evicted")
        compiler = self.policy.compiler
        return {
            "cache_dir": str(self.disk.root),
            "dry_run": self.policy.dry_run,
            "compiler": None if compiler is None or compiler.startswith("?") else compiler,
            "compiler_check": ("disabled (--keep-other-compilers)" if compiler is None else
                               f"skipped: {compiler[1:]}" if compiler.startswith("?") else "on"),
            "max_bytes": self.policy.max_bytes,
            "max_age_seconds": self.policy.max_age,
            "entries_before": before[0], "bytes_before": before[1],
            "entries_after": after[0], "bytes_after": after[1],
            "removed": removed,
            "bytes_freed": sum(a["bytes"] for a in self.actions if a["reason"] in entry_reasons),
            "skipped_locked": self.skipped_locked,
            "skipped_in_flight": self.skipped_in_flight,
            "errors": self.errors,
            "actions": self.actions,
        }


class RemoteCleaner:
    """One gc pass over a Redis namespace (`cache`: cache_service's RemoteCache, every call
    through its circuit breaker); `run()` returns the report dict. Only `max_bytes`, `max_age`
    and `dry_run` of the policy apply."""

    def __init__(self, cache, policy: Policy, now: float | None = None):
        self.cache, self.policy = cache, policy
        self.now = time.time() if now is None else now
        self.actions: list[dict] = []
        self.skipped_in_use: list[str] = []

    def run(self) -> dict:
        store = self.cache.store
        entries = self.cache.call(lambda: list(store.scan_entries()))
        before = (len(entries), sum(e.size for e in entries))
        untracked = sum(1 for e in entries if e.last_use_ms is None)
        if self.policy.max_age is not None:
            cutoff = self.now - self.policy.max_age
            entries = [e for e in entries
                       if not (self._last_use(e) < cutoff and self._remove(e, "expired"))]
        if self.policy.max_bytes is not None:
            entries = self._evict_to_budget(entries, self.policy.max_bytes)
        stale = 0 if self.policy.dry_run else self.cache.call(store.prune)
        return self._report(before, (len(entries), sum(e.size for e in entries)), untracked,
                            stale)

    def _last_use(self, entry) -> float:
        """Unix seconds; an entry the index has no time for counts as used now."""
        return self.now if entry.last_use_ms is None else entry.last_use_ms / 1000

    def _evict_to_budget(self, entries: list, budget: int) -> list:
        total = sum(e.size for e in entries)
        kept = []
        for entry in sorted(entries, key=self._last_use):      # least recently used first
            if total > budget and self._remove(entry, "evicted"):
                total -= entry.size
            else:
                kept.append(entry)
        return kept

    def _remove(self, entry, reason: str) -> bool:
        if not self.policy.dry_run and not self.cache.call(lambda: self.cache.store.evict(entry)):
            self.skipped_in_use.append(entry.key)   # used, replaced or removed meanwhile
            return False
        self.actions.append({"reason": reason, "key": entry.key, "bytes": entry.size,
                             "last_used": None if entry.last_use_ms is None
                             else entry.last_use_ms / 1000})
        return True

    def _report(self, before: tuple, after: tuple, untracked: int, stale: int) -> dict:
        removed = {reason: sum(1 for a in self.actions if a["reason"] == reason)
                   for reason in ("expired", "evicted")}
        return {
            "remote": self.cache.breaker.name, "namespace": self.cache.namespace.prefix,
            "dry_run": self.policy.dry_run,
            "max_bytes": self.policy.max_bytes, "max_age_seconds": self.policy.max_age,
            "entries_before": before[0], "bytes_before": before[1],
            "entries_after": after[0], "bytes_after": after[1],
            "removed": removed, "bytes_freed": sum(a["bytes"] for a in self.actions),
            "untracked": untracked, "stale_members_removed": stale,
            "skipped_in_use": self.skipped_in_use, "actions": self.actions,
        }


def format_remote_report(report: dict) -> str:
    verb = "would remove" if report["dry_run"] else "removed"
    removed = report["removed"]
    lines = [
        f"dgemm gc: {report['remote']} [{report['namespace']}]"
        + ("  (dry run: nothing changed)" if report["dry_run"] else ""),
        f"  entries           {report['entries_before']} "
        f"({format_size(report['bytes_before'])}) -> {report['entries_after']} "
        f"({format_size(report['bytes_after'])})",
        f"  {verb:<17} {removed['expired']} expired, {removed['evicted']} evicted (LRU), "
        f"{format_size(report['bytes_freed'])}",
        f"  skipped (in use)  {len(report['skipped_in_use'])} used or replaced meanwhile",
    ]
    if report["untracked"]:
        lines.append(f"  no last use       {report['untracked']} (counted as used now)")
    if report["stale_members_removed"]:
        lines.append(f"  stale members     {report['stale_members_removed']} index/meta members "
                     f"of vanished entries dropped")
    return "\n".join(lines)


def format_report(report: dict) -> str:
    verb = "would remove" if report["dry_run"] else "removed"
    removed = report["removed"]
    lines = [
        f"dgemm gc: {report['cache_dir']}" + ("  (dry run: nothing changed)"
                                               if report["dry_run"] else ""),
        f"  entries           {report['entries_before']} "
        f"({format_size(report['bytes_before'])}) -> {report['entries_after']} "
        f"({format_size(report['bytes_after'])})",
        f"  {verb:<17} {removed['corrupt']} corrupt, {removed['other_compiler']} of other "
        f"compilers, {removed['expired']} expired, {removed['evicted']} evicted (LRU)",
        f"  {verb:<17} {removed['temp_file']} temp files, {removed['dead_lock']} dead locks",
        f"  compiler check    {report['compiler'] or report['compiler_check']}",
        f"  skipped (locked)  {len(report['skipped_locked'])}",
        f"  kept (in flight)  {len(report['skipped_in_flight'])} temp files of live writers",
    ]
    lines += [f"  ERROR {error}" for error in report["errors"]]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------
def _current_compiler() -> str:
    """The identity ("nvrtc 13.0") stored in entries this node builds; "?reason" if unknown."""
    try:
        from dgemm.jit import compiler
        return compiler.get_compiler().identity
    except Exception as exc:            # no NVRTC/NVCC here: keep entries rather than guess
        return f"?{type(exc).__name__}: {exc}"


def _regular_files(directory: Path, name: re.Pattern, errors: list[str]) -> list[tuple]:
    """(path, lstat) of the regular files in `directory` whose names match `name` (dgemm's
    own); symlinks, other kinds and foreign names are never returned, so never removed."""
    found = []
    try:
        with os.scandir(directory) as listing:
            for item in listing:
                if name.match(item.name) and item.is_file(follow_symlinks=False):
                    stat = _lstat(Path(item.path))
                    if stat is not None and stat_module.S_ISREG(stat.st_mode):
                        found.append((Path(item.path), stat))
    except FileNotFoundError:
        pass
    except OSError as exc:
        errors.append(f"cannot list {directory}: {exc}")
    return found


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _identity(stat: os.stat_result) -> tuple:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def writer_may_be_alive(pid: int, changed_at: float) -> bool:
    """Whether process `pid`, named in a temp file last changed at `changed_at`, may still be
    writing it. Pass the file's ctime: no one can set it back (touch only moves it later, which
    errs towards "alive"). A process that started well after that change has only reused the
    pid; a zombie has finished. Unknowable cases (another user's process without /proc) count
    as alive: the file waits for a later run rather than a publish being cut off."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                            # alive, another user's
    except (OverflowError, OSError):
        return False                    # no such pid can exist
    started = _process_start(pid)
    if started is None:
        return True
    state, started_at = started
    return state != "Z" and started_at <= changed_at + _PID_REUSE_SLACK


def _process_start(pid: int) -> tuple[str, float] | None:
    """(state letter, start time in unix seconds) of a process from Linux's /proc; None
    elsewhere or when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
        # The name (field 2) is in parentheses and may hold spaces or ')': split after the last.
        fields = text[text.rindex(")") + 2:].split()
        state, start_ticks = fields[0], int(fields[19])     # fields 3 and 22 of proc(5)
        return state, _boot_time() + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@functools.lru_cache(maxsize=1)
def _boot_time() -> float:
    with open("/proc/stat", "rb") as handle:
        for line in handle:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")


def _is_held(lock_path: Path) -> bool:
    """Whether another process holds a lock file, probed without creating, following or
    changing it (a lock path that is not a plain file counts as held: leave it alone)."""
    try:
        descriptor = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        if not stat_module.S_ISREG(os.fstat(descriptor).st_mode):
            return True
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False                    # closing the descriptor drops the probe's lock
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)


def _is_plain_or_missing(path: Path) -> bool:
    """filelock opens (and truncates) its path following symlinks: take a lock only on a
    regular file or a missing one."""
    stat = _lstat(path)
    return stat is None or stat_module.S_ISREG(stat.st_mode)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_size(text: str) -> int | None:
    """'500M', '10G', '123' (bytes), or 'none' -> bytes (binary units) or None."""
    if text.strip().lower() == "none":
        return None
    match = re.fullmatch(r"\s*(\d{1,15}(?:\.\d{1,9})?)\s*([KMGT]?)(?:i?B)?\s*", text,
                         re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a size such as 500M, 10G or 'none'; "
                                         f"got {text!r}")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).upper()])


def parse_age(text: str) -> float | None:
    """'30d', '12h', '90m', '45s', '2w', or 'none' -> seconds or None. A unit is required: a
    bare `--max-age 30` read as seconds would empty the cache."""
    if text.strip().lower() == "none":
        return None
    if re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", text):
        raise argparse.ArgumentTypeError(f"give a unit, e.g. 30d (s, m, h, d or w); got "
                                         f"{text!r}")
    match = re.fullmatch(r"\s*(\d{1,15}(?:\.\d{1,9})?)\s*([smhdw])\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected an age with a unit such as 90m, 12h, 30d "
                                         f"or 'none'; got {text!r}")
    return float(match.group(1)) * _AGE_UNITS[match.group(2)]


def _stale_age(text: str) -> float:
    age = parse_age(text)
    if age is None:
        raise argparse.ArgumentTypeError("expected an age such as 10m or 1h; 'none' would "
                                         "keep dead temp and lock files forever")
    if age < MIN_STALE_AFTER:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_STALE_AFTER:g}s (e.g. 10m); "
                                         f"got {text!r}, which could remove the temp file "
                                         f"of a publish in flight")
    return age


def format_size(count: int) -> str:
    """A byte count for people: "512 B", "1.5 KiB", ... "3.2 GiB" (the inverse of parse_size
    up to rounding)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)
