"""`dgemm-cache gc`: keep one node's disk cache healthy and within budget (cron or systemd).

In order: drop temp files and unheld lock files older than `--stale-after` (left by processes
that died mid-publish or after compiling), verify every entry and remove the corrupt ones,
remove entries of compilers other than the one this node uses, then remove entries unused for
longer than `--max-age` and evict the least recently used (by mtime, which a hit refreshes)
until the entries fit in `--max-bytes`.

An entry is removed only while holding its per-key lock, taken without waiting: a held lock
means a process is compiling or publishing that key, so the entry is skipped. Under the lock the
file must still be the one that was judged (same inode, size and mtime), so an entry replaced
or used in the meantime survives. `--dry-run` takes no lock and changes nothing; it reports what
would go. Exit status: 0 on success (skips included), 1 when something could not be read or
removed, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import re
import sys
import time
from pathlib import Path

import filelock

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
REASONS = ("temp_file", "dead_lock", "corrupt", "other_compiler", "expired", "evicted")


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", metavar="DIR", default=None,
                        help="the cache to clean (default: DGEMM_CACHE_DIR, else ~/.cache/dgemm)")
    parser.add_argument("--max-bytes", type=parse_size, default=parse_size("10G"), metavar="SIZE",
                        help="evict least recently used entries down to this size, e.g. 500M, "
                             "10G, or 'none' (default 10G)")
    parser.add_argument("--max-age", type=parse_age, default=parse_age("30d"), metavar="AGE",
                        help="remove entries unused for longer than this, e.g. 12h, 30d, or "
                             "'none' (default 30d)")
    parser.add_argument("--stale-after", type=_stale_age, default=3600.0, metavar="AGE",
                        help="age after which temp files and unheld lock files count as left "
                             "behind by dead processes (default 1h)")
    parser.add_argument("--keep-other-compilers", action="store_true",
                        help="keep entries built by another compiler or compiler version")
    parser.add_argument("--dry-run", action="store_true",
                        help="report what would be removed; change nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cleanup", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    from dgemm.jit import env
    from dgemm.jit.tiers import DiskTier

    try:
        root = Path(args.cache_dir).expanduser() if args.cache_dir else env.cache_dir()
        secret = env.cache_secret()
    except ValueError as exc:           # a malformed DGEMM_* variable (dgemm ConfigError)
        print(f"gc: {exc}", file=sys.stderr)
        return EXIT_USAGE
    policy = Policy(max_bytes=args.max_bytes, max_age=args.max_age,
                    stale_after=args.stale_after, dry_run=args.dry_run,
                    compiler=None if args.keep_other_compilers else _current_compiler())
    report = Cleaner(DiskTier(root, secret), policy).run()
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return EXIT_FAILED if report["errors"] else EXIT_OK


# ------------------------------------------------------------------------------------------
# The cleaner
# ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Policy:
    max_bytes: int | None           # None: no size budget
    max_age: float | None           # seconds; None: no age limit
    stale_after: float              # seconds before a temp or unheld lock file counts as dead
    dry_run: bool = False
    # "name version" of the compiler this node uses; entries of others are removed. None keeps
    # them. A str starting with "?" means it could not be determined (check skipped).
    compiler: str | None = None


@dataclasses.dataclass
class _Scanned:
    key: str
    path: Path
    stat: os.stat_result


class Cleaner:
    """One pass over a DiskTier's directory; `run()` returns the report dict."""

    def __init__(self, disk, policy: Policy, now: float | None = None):
        self.disk, self.policy = disk, policy
        self.now = time.time() if now is None else now
        self.actions: list[dict] = []
        self.skipped_locked: list[str] = []
        self.errors: list[str] = []

    def run(self) -> dict:
        self._remove_stale_files(self.disk.tmp_dir, "temp_file")
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
    def _remove_stale_files(self, directory: Path, reason: str) -> None:
        for path in _files(directory, self.errors):
            stat = _stat(path)
            if stat is not None and self.now - stat.st_mtime > self.policy.stale_after:
                self._act(reason, path, stat.st_size, lambda p=path: p.unlink())

    def _remove_dead_locks(self) -> None:
        for path in _files(self.disk.locks_dir, self.errors):
            stat = _stat(path)
            if stat is None or self.now - stat.st_mtime <= self.policy.stale_after:
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
                stat = _stat(path)
                if stat is not None:
                    scanned.append(_Scanned(key, path, stat))
        except OSError as exc:
            self.errors.append(f"cannot list entries under {self.disk.entries_dir}: {exc}")
        return scanned

    def _judge(self, scanned: _Scanned) -> bool:
        """Verify one entry; remove it if corrupt or from another compiler. True if removed."""
        from dgemm.jit import entry as entry_format
        from dgemm.jit.errors import EntryError

        try:
            blob = scanned.path.read_bytes()
        except FileNotFoundError:
            return True                     # removed by someone else since the scan
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
            current = _stat(scanned.path)
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
            "errors": self.errors,
            "actions": self.actions,
        }


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


def _files(directory: Path, errors: list[str]) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if p.is_file()]
    except FileNotFoundError:
        return []
    except OSError as exc:
        errors.append(f"cannot list {directory}: {exc}")
        return []


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _identity(stat: os.stat_result) -> tuple:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _is_held(lock_path: Path) -> bool:
    """Whether another process holds a lock file, probed without creating or changing it."""
    try:
        descriptor = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False                    # closing the descriptor drops the probe's lock
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_size(text: str) -> int | None:
    """'500M', '10G', '123' (bytes), or 'none' -> bytes (binary units) or None."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if text.strip().lower() == "none":
        return None
    if not match:
        raise argparse.ArgumentTypeError(f"expected a size such as 500M, 10G or 'none'; "
                                         f"got {text!r}")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).upper()])


def parse_age(text: str) -> float | None:
    """'30d', '12h', '90m', '3600' (seconds), or 'none' -> seconds or None."""
    if text.strip().lower() == "none":
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected an age such as 3600, 90m, 12h, 30d or "
                                         f"'none'; got {text!r}")
    return float(match.group(1)) * _AGE_UNITS[match.group(2)]


def _stale_age(text: str) -> float:
    age = parse_age(text)
    if age is None:
        raise argparse.ArgumentTypeError("expected an age such as 10m or 1h; 'none' would "
                                         "keep dead temp and lock files forever")
    return age


def format_size(count: int) -> str:
    """A byte count for people: "512 B", "1.5 KiB", ... "3.2 GiB" (the inverse of parse_size
    up to rounding)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)
