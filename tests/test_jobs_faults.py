"""Faults and hostile inputs for the jobs and `dgemm-cache` (issue 15, items 4, 9 and 10):

- gc never cuts off a publish in flight, touches only dgemm's own names and refuses a
  directory that is not a dgemm cache, a bare-number --max-age and a --stale-after under 60 s;
- the workers of a SIGKILLed prewarm die with it;
- export never renames over a symlink, FIFO, device or directory, nor into a missing one;
- malformed manifests, M ranges and bundles end in one clear line and exit 2, never a
  traceback; a crafted entry in the cache does not crash ls, verify, export or gc.

Everything runs on real files and real processes; subprocesses always run under a timeout.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from dgemm.jit.tiers import DiskTier
from dgemm.jobs import bundle, cleanup, manifest, sync
from cli_helpers import process_table, run_cli
from redis_server import make_entry_blob

REPO = Path(__file__).resolve().parent.parent
KEY_A, KEY_B, KEY_C = "a1" * 32, "b2" * 32, "c3" * 32
HOUR = 3600.0
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@pytest.fixture
def disk(fresh_dgemm_cache) -> DiskTier:
    return DiskTier(fresh_dgemm_cache)


def assert_refused(capsys, argv, fragment: str) -> None:
    """Exit 2 with one message line holding `fragment`, and no traceback."""
    status, out, err = run_cli(capsys, *argv)
    assert "Traceback" not in out + err
    assert status == 2, (argv, status, out, err)
    # argparse prints its usage (first line "usage:", continuation lines indented) first.
    message = [line for line in err.splitlines()
               if line.strip() and not line.startswith(("usage:", " "))]
    assert len(message) == 1, err
    assert fragment in message[0], message[0]


def start_python(code: str, **extra_env) -> subprocess.Popen:
    environment = dict(os.environ, PYTHONPATH=str(REPO), **extra_env)
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def age(path: Path, hours: float) -> None:
    stamp = time.time() - hours * HOUR
    os.utime(path, (stamp, stamp), follow_symlinks=False)


def dead_pid() -> int:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait(timeout=60)
    return finished.pid


def tree(root: Path) -> dict:
    return {str(p): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in root.rglob("*")}


# ------------------------------------------------------------------------------------------------
# gc (item 4)
# ------------------------------------------------------------------------------------------------
PUT_BLOB = """
import sys
from pathlib import Path
from dgemm.jit.tiers import DiskTier
root, key, blob = sys.argv[1], sys.argv[2], Path(sys.argv[3]).read_bytes()
DiskTier(Path(root)).put_blob(key, blob)
"""

WALK = """
import dgemm.jit
from dgemm.heuristics import select
print(dgemm.jit.ensure_compiled(select('fp8_gemm_nt', 128, 4096, 7168)))
"""


def test_gc_keeps_the_temp_files_of_publishes_in_flight_and_no_publish_fails(
        capsys, disk, test_kernels, tmp_path):
    # Two publishers as sync and import publish (no lock) and one through the walk (under the
    # key's lock), each paused with its temp file written; gc then sees those temp files aged
    # far past --stale-after. The old gc removed them and the publishes failed.
    publishers, markers = [], []
    for index, key in enumerate((KEY_A, KEY_B)):
        blob = tmp_path / f"{key[:4]}.blob"
        blob.write_bytes(make_entry_blob(key))
        markers.append(tmp_path / f"marker{index}")
        code = PUT_BLOB.replace("sys.argv[1], sys.argv[2], Path(sys.argv[3])",
                                f"{str(disk.root)!r}, {key!r}, Path({str(blob)!r})")
        publishers.append(start_python(code, DGEMM_TEST_PAUSE="publish:12",
                                       DGEMM_TEST_PAUSE_MARKER=str(markers[-1])))
    markers.append(tmp_path / "marker-walk")
    publishers.append(start_python(WALK, DGEMM_TEST_PAUSE="publish:12",
                                   DGEMM_TEST_PAUSE_MARKER=str(markers[-1])))
    try:
        wait_for(lambda: all(m.exists() for m in markers), "every publisher to pause")
        temps = sorted(disk.tmp_dir.iterdir())
        assert len(temps) == 3
        for temp in temps:
            age(temp, 2)
        status, out, err = run_cli(capsys, "gc", "--stale-after", "1m", "--max-age", "none",
                                   "--max-bytes", "none", "--json")
        report = json.loads(out)
        assert status == 0, err
        assert report["removed"]["temp_file"] == 0
        assert sorted(report["skipped_in_flight"]) == [str(t) for t in temps]
        assert all(t.exists() for t in temps)
        results = [p.communicate(timeout=120) + (p.returncode,) for p in publishers]
    finally:
        for process in publishers:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert [rc for _, _, rc in results] == [0] * 3, [err for _, err, _ in results]
    assert disk.get(KEY_A) is not None and disk.get(KEY_B) is not None
    assert len(list(disk.iter_entries())) == 3
    assert list(disk.tmp_dir.iterdir()) == []


def test_gc_removes_only_dgemm_names_in_tmp_and_locks(capsys, disk):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    outside = disk.root.parent / "outside.txt"
    outside.write_text("not dgemm's")
    foreign = [disk.tmp_dir / "notes.txt", disk.tmp_dir / "a.123.beef.tmp",
               disk.tmp_dir / f"{KEY_B}.tmp", disk.tmp_dir / f"{KEY_B.upper()}.1.abcdef01.tmp",
               disk.locks_dir / "x.lock", disk.locks_dir / f"{KEY_B}.lock.bak",
               disk.locks_dir / "README"]
    for path in foreign:
        path.write_text("keep me")
    link = disk.tmp_dir / f"{KEY_C}.{dead_pid()}.0badf00d.tmp"
    link.symlink_to(outside)
    dead_temp = disk.tmp_dir / f"{KEY_B}.{dead_pid()}.0123abcd.tmp"
    dead_temp.write_bytes(b"partial")
    dead_lock = disk.lock_path(KEY_C)
    dead_lock.write_bytes(b"")
    for path in [*foreign, link, dead_temp, dead_lock]:
        age(path, 48)
    status, out, err = run_cli(capsys, "gc", "--stale-after", "1h", "--json")
    assert status == 0, err
    assert all(path.read_text() == "keep me" for path in foreign)
    assert link.is_symlink() and outside.read_text() == "not dgemm's"
    assert not dead_temp.exists() and not dead_lock.exists()
    assert json.loads(out)["removed"]["temp_file"] == 1


@pytest.mark.parametrize("layout", ["home", "file"])
def test_gc_refuses_a_directory_that_is_not_a_dgemm_cache_and_deletes_nothing(
        capsys, tmp_path, layout):
    home = tmp_path / "home"
    if layout == "file":
        home.parent.mkdir(exist_ok=True)
        home.write_text("a file")
    else:
        for sub in ("tmp", "locks", "Documents"):
            (home / sub).mkdir(parents=True)
        old = [home / "tmp" / "build.log", home / "tmp" / f"{KEY_A}.{dead_pid()}.0123abcd.tmp",
               home / "locks" / f"{KEY_A}.lock", home / "Documents" / "thesis.tex"]
        for path in old:
            path.write_text("mine")
            age(path, 24 * 400)
    before = tree(tmp_path)
    assert_refused(capsys, ["gc", "--cache-dir", home], "not a dgemm cache")
    assert tree(tmp_path) == before


def test_gc_accepts_an_empty_cache_directory_or_a_missing_default_one(capsys, tmp_path,
                                                                       monkeypatch):
    # A missing directory named by --cache-dir is refused (a typo): tests/test_ops_cli.py.
    (tmp_path / "empty").mkdir()
    status, _, err = run_cli(capsys, "gc", "--cache-dir", tmp_path / "empty")
    assert status == 0, err
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "missing"))
    status, _, err = run_cli(capsys, "gc")
    assert status == 0, err


def test_gc_policy_refuses_a_stale_after_under_a_minute_from_python():
    with pytest.raises(ValueError, match="at least 60 seconds"):
        cleanup.Policy(max_bytes=None, max_age=None, stale_after=0)


@needs_proc
def test_a_pid_taken_by_a_process_younger_than_the_temp_file_is_not_its_writer():
    me = os.getpid()
    assert cleanup.writer_may_be_alive(me, time.time())
    assert not cleanup.writer_may_be_alive(me, time.time() - 30 * 24 * HOUR)   # reused pid
    assert not cleanup.writer_may_be_alive(dead_pid(), time.time())
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_for(lambda: Path(f"/proc/{zombie.pid}/stat").read_text().split(")")[-1].split()[0]
                 == "Z", "the child to exit")
        assert not cleanup.writer_may_be_alive(zombie.pid, time.time())
    finally:
        zombie.wait()


# ------------------------------------------------------------------------------------------------
# Orphaned prewarm workers (item 9)
# ------------------------------------------------------------------------------------------------
def _descendants(pid: int) -> set:
    table, found, frontier = process_table(), set(), {pid}
    while frontier:
        frontier = {child for child, (parent, _) in table.items() if parent in frontier}
        found |= frontier
    return found


def _running(pids: set) -> set:
    table = process_table()
    return {pid for pid in pids if pid in table and table[pid][1] != "Z"}


@needs_proc
def test_the_workers_of_a_sigkilled_prewarm_die_with_it(tmp_path, test_kernels, fresh_dgemm_cache):
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"dense": {"m": [1, 128], "nk": [[256, 512], [512, 512]]}}))
    marker = tmp_path / "compiling"
    environment = dict(os.environ, PYTHONPATH=str(REPO), DGEMM_TEST_PAUSE="compile:60",
                       DGEMM_TEST_PAUSE_MARKER=str(marker))
    job = subprocess.Popen([sys.executable, "-m", "dgemm.cli", "prewarm", "--manifest",
                            str(shapes), "--jobs", "2", "--no-progress"], cwd=REPO,
                           env=environment, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    workers = set()
    try:
        wait_for(marker.exists, "a worker to start compiling")
        wait_for(lambda: len(_descendants(job.pid)) >= 2, "the pool's processes")
        workers = _descendants(job.pid)
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=10)
        deadline = time.monotonic() + 15
        while _running(workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _running(workers)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        for pid in _running(workers):       # a failing run must not leak them either
            os.kill(pid, signal.SIGKILL)
    assert not left, f"prewarm workers outlived their SIGKILLed parent: {sorted(left)}"


# ------------------------------------------------------------------------------------------------
# export FILE (item 9)
# ------------------------------------------------------------------------------------------------
def _make_target(kind: str, path: Path) -> callable:
    """Put a `kind` at `path`; returns a check that it is untouched."""
    if kind == "symlink":
        victim = path.with_name("victim.txt")
        victim.write_text("precious")
        path.symlink_to(victim)
        return lambda: path.is_symlink() and victim.read_text() == "precious"
    if kind == "fifo":
        os.mkfifo(path)
        return lambda: stat.S_ISFIFO(path.lstat().st_mode)
    if kind == "directory":
        path.mkdir()
        (path / "inside").write_text("x")
        return lambda: path.is_dir() and (path / "inside").read_text() == "x"
    if kind == "device":
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))      # a /dev/null
        device = path.lstat().st_rdev
        return lambda: (stat.S_ISCHR(path.lstat().st_mode) and path.lstat().st_rdev == device)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", [
    "symlink", "fifo", "directory",
    pytest.param("device", marks=pytest.mark.skipif(not IS_ROOT, reason="mknod needs root"))])
def test_export_refuses_a_target_that_is_not_a_regular_file(capsys, disk, tmp_path, kind):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "kernels.tar"
    untouched = _make_target(kind, target)
    assert_refused(capsys, ["export", target, "--no-progress"], "refusing to export")
    assert untouched()
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".tmp")]


def test_export_into_a_missing_directory_exits_2_and_names_it(capsys, disk, tmp_path):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    assert_refused(capsys, ["export", tmp_path / "no" / "such" / "k.tar", "--no-progress"],
                   "does not exist")
    assert not (tmp_path / "no").exists()


def test_export_replaces_an_existing_regular_file(capsys, disk, tmp_path):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    target = tmp_path / "k.tar"
    target.write_text("an older bundle")
    status, out, err = run_cli(capsys, "export", target, "--no-progress", "--json")
    assert status == 0, err
    assert json.loads(out)["entries"] == 1 and tarfile.is_tarfile(target)


# ------------------------------------------------------------------------------------------------
# Malformed manifests, M ranges and bundles (item 10)
# ------------------------------------------------------------------------------------------------
DEEP = "[" * 100_000
DENSE = {"m": [64], "nk": [[256, 512]]}
NO_SHAPES = ('names no shapes: expected "dense", "grouped_contiguous", "grouped_masked", "wgrad" '
             'and/or "k_grouped"')
BAD_MANIFESTS = [
    ('{"dense": []}', '"dense" must be an object'),
    ("{}", NO_SHAPES),
    ('{"notes": "x"}', NO_SHAPES),
    ('{"dens": {"m": [64], "nk": [[256, 512]]}}', 'unknown section "dens"'),
    ('{"dense": {"m": [64], "nk": [[256, 512]]}, "grouped_contigous": []}',
     'unknown section "grouped_contigous"; expected "dense", "grouped_contiguous"'),
    ('{"dense": {"m": [64], "nk": [[256, 512]]}, "labels": {"256x512": [1]}}',
     'unknown section "labels"'),
    ("[]", "must be a JSON object"),
    ('"dense"', "must be a JSON object"),
    ("null", "must be a JSON object"),
    (DEEP, "nested too deeply"),
    ('{"dense": ' + DEEP, "nested too deeply"),
    ("{not json", "not valid JSON"),
    (b"\xff\xfe{}", "not valid JSON"),
    ("", "not valid JSON"),
    ('{"dense": {"m": "64", "nk": [[256, 512]]}}', "dense.m must be a list"),
    ('{"dense": {"m": [64], "nk": {"n": 256}}}', "dense.nk must be a list"),
    ('{"dense": {"m": [64], "nk": [256, 512]}}', "dense.nk[0] must be [n, k]"),
    ('{"dense": {"m": [64], "nk": [[256, "512"]]}}', "dense.nk[0] must be a list of integers"),
    ('{"dense": {"m": [0], "nk": [[256, 512]]}}', "dense.m must be a list of integers"),
    ('{"dense": {"m": [-64], "nk": [[256, 512]]}}', "dense.m must be a list of integers"),
    ('{"dense": {"m": [64], "nk": [[0, 512]]}}', "dense.nk[0] must be a list of integers"),
    ('{"dense": {"m": [64], "nk": [[256, -512]]}}', "dense.nk[0] must be a list of integers"),
    ('{"dense": {"m": [true], "nk": [[256, 512]]}}', "dense.m must be a list of integers"),
    ('{"dense": {"m": [64.5], "nk": [[256, 512]]}}', "dense.m must be a list of integers"),
    ('{"dense": {"m": [64], "nk": [[1099511627776, 512]]}}', "1..2147483647"),
    ('{"dense": {"m": [64], "nk": [[256, 100]]}}', "k must be a multiple of 128"),
    ('{"dense": {"m": [64], "nk": []}}', "names no GEMM problem"),
    ('{"dense": {"m": [[[[64]]]], "nk": [[256, 512]]}}', "dense.m must be a list of integers"),
    ('{"grouped_contiguous": {}}', '"grouped_contiguous" must be a list'),
    ('{"grouped_masked": "x"}', '"grouped_masked" must be a list'),
    ('{"grouped_masked": [1]}', "grouped_masked[0] must be an object"),
    ('{"grouped_masked": [{"groups": 1}]}', "grouped_masked[0] must be an object"),
    ('{"grouped_contiguous": [{"groups": 0, "m_per_group": 256, "n": 4096, "k": 7168}]}',
     "grouped_contiguous[0] must be a list of integers"),
]
# Inputs that once made prewarm enumerate (and select a kernel for) billions of problems: run
# in a subprocess under a timeout, so a regression fails instead of hanging the suite.
HUGE_CONTIGUOUS = [
    ('{"grouped_contiguous": [{"groups": 100000, "m_per_group": 100000, "n": 4096, '
     '"k": 7168}]}', "at most 2147483647"),
    ('{"grouped_contiguous": [{"groups": 1000, "m_per_group": 1000000, "n": 4096, '
     '"k": 7168}]}', "total M values; at most 100000"),
]


@pytest.mark.parametrize("text, fragment", BAD_MANIFESTS,
                         ids=[f"manifest{i}" for i in range(len(BAD_MANIFESTS))])
def test_a_malformed_manifest_exits_2_with_one_line(capsys, tmp_path, text, fragment):
    path = tmp_path / "shapes.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert_refused(capsys, ["prewarm", "--manifest", path, "--no-progress"], fragment)


def test_notes_beside_the_sections_may_be_strings_or_objects_of_strings(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({"about": "x", "dense": DENSE,
                                "dense_layers": {"256x512": "a layer"}}))
    assert manifest.problems(manifest.load_manifest(path), [], 0.3)


BAD_OPTIONS = [
    (["--m-range", "1-10:0"], "bad M range"),
    (["--m-range", "abc"], "bad M range"),
    (["--m-range", "0"], "only 1 <= M"),
    (["--m-range", "5-1"], "at least one M"),
    (["--m-range", "99999999999"], "only 1 <= M"),
    (["--m-range", "1-2-3"], "bad M range"),
    (["--contiguous-spread", "nan"], "contiguous spread"),
    (["--contiguous-spread", "1.5"], "contiguous spread"),
    (["--arch", "sm_xx"], "arch must be"),
    (["--shard", "3/2"], "expected I/N"),
    (["--jobs", "0"], "positive integer"),
]


@pytest.mark.parametrize("options, fragment", BAD_OPTIONS,
                         ids=[" ".join(o) for o, _ in BAD_OPTIONS])
def test_bad_prewarm_options_exit_2_with_one_line(capsys, tmp_path, options, fragment):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({"dense": DENSE,
                                "grouped_contiguous": [{"groups": 2, "m_per_group": 256,
                                                        "n": 4096, "k": 7168}]}))
    assert_refused(capsys, ["prewarm", "--manifest", path, "--no-progress", *options], fragment)


BAD_GC_OPTIONS = [
    (["--stale-after", "0"], "give a unit"),
    (["--stale-after", "0s"], "at least 60s"),
    (["--stale-after", "30s"], "at least 60s"),
    (["--stale-after", "none"], "forever"),
    (["--max-age", "30"], "give a unit, e.g. 30d"),
    (["--max-age=-1d"], "expected an age"),
    (["--max-age", "1e400d"], "expected an age"),
    (["--max-bytes", "9" * 400 + "G"], "expected a size"),
    (["--max-bytes", "lots"], "expected a size"),
]


@pytest.mark.parametrize("options, fragment", BAD_GC_OPTIONS,
                         ids=[" ".join(o)[:30] for o, _ in BAD_GC_OPTIONS])
def test_bad_gc_options_exit_2_with_one_line(capsys, disk, options, fragment):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    before = tree(disk.root)
    assert_refused(capsys, ["gc", *options], fragment)
    assert tree(disk.root) == before


def test_the_manifest_api_raises_manifest_error_a_value_error():
    for bad in ({"dense": []}, {}, [], {"dense": {"m": [64], "nk": [["a", 1]]}}):
        with pytest.raises(manifest.ManifestError):
            manifest.problems(bad)
    with pytest.raises(ValueError, match="at most 100000"):
        manifest.parse_m_range("1-100000000")


# --- bundles -------------------------------------------------------------------------------------
def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, size: int = None,
            linkname: str = "") -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, 0o600
    info.size = len(data) if size is None else size
    header = info.tobuf(format=tarfile.PAX_FORMAT)
    padding = b"\0" * (-len(data) % tarfile.BLOCKSIZE)
    return header + data + padding


def _tar(*members: bytes) -> bytes:
    return b"".join(members) + b"\0" * (2 * tarfile.BLOCKSIZE)


def _manifest(entries=None, **fields) -> bytes:
    body = {"format": "dgemm-bundle", "version": 1, "created": 0.0,
            "entries": [] if entries is None else entries}
    body.update(fields)
    return json.dumps(body).encode()


def _good_bundle() -> bytes:
    import hashlib
    blob = make_entry_blob(KEY_A)
    listed = [{"key": KEY_A, "sha256": hashlib.sha256(blob).hexdigest()}]
    return _tar(_member(f"entries/{KEY_A}.kbin", blob), _member("manifest.json",
                                                                  _manifest(listed)))


def _bundles() -> list:
    good = _good_bundle()
    entry_member = _member(f"entries/{KEY_A}.kbin", make_entry_blob(KEY_A))
    return [
        ("not a tar", b"hello, world", "not a readable dgemm bundle"),
        ("empty", b"", "not a readable dgemm bundle"),
        ("truncated in an entry", good[:tarfile.BLOCKSIZE * 3 + 100], "not a readable"),
        ("truncated before the manifest", entry_member, "no manifest.json"),
        ("no manifest", _tar(entry_member), "no manifest.json"),
        ("manifest not json", _tar(_member("manifest.json", b"{nope")), "not JSON"),
        ("manifest not utf-8", _tar(_member("manifest.json", b"\xff\xfe\x00")), "not JSON"),
        ("manifest nested", _tar(_member("manifest.json", DEEP.encode())), "nested too deeply"),
        ("manifest a list", _tar(_member("manifest.json", b"[]")), "not an object"),
        ("wrong format", _tar(_member("manifest.json", _manifest(format=["x"] * 100))),
         "this dgemm reads"),
        ("wrong version", _tar(_member("manifest.json", _manifest(version="1"))),
         "this dgemm reads"),
        ("entries an object", _tar(_member("manifest.json", _manifest(entries={}))),
         "'entries' is"),
        ("entries of ints", _tar(_member("manifest.json", _manifest(entries=[1]))),
         "entries[0]"),
        ("key of the wrong type", _tar(_member("manifest.json", _manifest(
            entries=[{"key": 5, "sha256": "ab" * 32}]))), "entries[0]"),
        ("key that is a path", _tar(_member("manifest.json", _manifest(
            entries=[{"key": "../../etc/passwd", "sha256": "ab" * 32}]))), "entries[0]"),
        ("entry a symlink", _tar(_member(f"entries/{KEY_A}.kbin", kind=tarfile.SYMTYPE,
                                         linkname="/etc/passwd"),
                                 _member("manifest.json", _manifest())), "not a regular file"),
        ("entry a hard link", _tar(_member(f"entries/{KEY_A}.kbin", kind=tarfile.LNKTYPE,
                                           linkname="manifest.json"),
                                   _member("manifest.json", _manifest())), "not a regular"),
        ("manifest a directory", _tar(_member("manifest.json", kind=tarfile.DIRTYPE)),
         "not a regular file"),
        ("entry a FIFO", _tar(_member(f"entries/{KEY_A}.kbin", kind=tarfile.FIFOTYPE),
                              _member("manifest.json", _manifest())), "not a regular file"),
        ("absurd size", _member(f"entries/{KEY_A}.kbin", size=1 << 40), "claims"),
        ("absurd manifest", _member("manifest.json", size=1 << 40), "claims"),
    ]


BUNDLES = _bundles()


@pytest.mark.parametrize("name, data, fragment", BUNDLES, ids=[b[0] for b in BUNDLES])
def test_a_malformed_bundle_exits_2_with_one_line_and_imports_nothing(
        capsys, disk, tmp_path, name, data, fragment):
    path = tmp_path / "bundle.tar"
    path.write_bytes(data)
    assert_refused(capsys, ["import", path], fragment)
    assert not disk.root.exists() or not list(disk.iter_entries())


def test_import_of_a_fifo_exits_2_without_blocking(disk, tmp_path):
    path = tmp_path / "bundle.tar"
    os.mkfifo(path)             # no writer: a blocking open would hang (hence a subprocess)
    result = subprocess.run([sys.executable, "-m", "dgemm.cli", "import", str(path)], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                            text=True, timeout=60)
    assert "Traceback" not in result.stderr and result.returncode == 2, result.stderr
    assert "it is a FIFO" in result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("kind", ["directory", "missing"])
def test_import_of_a_directory_or_missing_path_exits_2(capsys, disk, tmp_path, kind):
    path = tmp_path / "bundle.tar"
    if kind == "directory":
        path.mkdir()
    assert_refused(capsys, ["import", path], "not a readable dgemm bundle")


def test_the_hand_made_good_bundle_imports(capsys, disk, tmp_path):
    # The malformed bundles above are variations of this one: it must be accepted.
    path = tmp_path / "bundle.tar"
    path.write_bytes(_good_bundle())
    status, out, err = run_cli(capsys, "import", path, "--json")
    assert status == 0, err
    assert json.loads(out)["entries"] == 1 and disk.get(KEY_A) is not None


def test_the_bundle_api_raises_bundle_error_a_value_error(tmp_path):
    path = tmp_path / "bundle.tar"
    path.write_bytes(_tar(_member("manifest.json", DEEP.encode())))
    with pytest.raises(ValueError, match="nested too deeply") as raised:
        bundle.import_bundle(path, None, lambda entry: None)
    assert isinstance(raised.value, bundle.BundleError)


# --- the same through a real `dgemm-cache` process -----------------------------------------------
def _subprocess_cases(tmp_path: Path) -> list:
    (tmp_path / "dense-list.json").write_text('{"dense": []}')
    (tmp_path / "nested.tar").write_bytes(_tar(_member("manifest.json", DEEP.encode())))
    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    (home / "tmp" / "old.log").write_text("mine")
    huge = []
    for index, (text, fragment) in enumerate(HUGE_CONTIGUOUS):
        (tmp_path / f"huge{index}.json").write_text(text)
        huge.append((["prewarm", "--manifest", tmp_path / f"huge{index}.json", "--no-progress"],
                     fragment))
    return huge + [
        (["prewarm", "--manifest", tmp_path / "dense-list.json", "--no-progress"],
         '"dense" must be an object'),
        (["prewarm", "--preset", "deepseek_v3", "--m-range", "1-100000000"], "at most 100000"),
        (["import", tmp_path / "nested.tar"], "nested too deeply"),
        (["gc", "--cache-dir", home], "not a dgemm cache"),
    ]


def test_malformed_inputs_through_real_dgemm_cache_processes(tmp_path, fresh_dgemm_cache):
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    cases = _subprocess_cases(tmp_path)
    processes = [subprocess.Popen([sys.executable, "-m", "dgemm.cli", *map(str, argv)],
                                  cwd=REPO, env=environment, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for argv, _ in cases]
    try:
        results = [process.communicate(timeout=120) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for (argv, fragment), (out, err), process in zip(cases, results, processes):
        assert "Traceback" not in out + err, err
        assert process.returncode == 2, (argv, err)
        assert fragment in err.strip().splitlines()[-1], err
    assert (tmp_path / "home" / "tmp" / "old.log").read_text() == "mine"


# ------------------------------------------------------------------------------------------------
# Hostile entries in the cache: every command goes on past them
# ------------------------------------------------------------------------------------------------
def _crafted_entry(disk: DiskTier, key: str) -> Path:
    """An entry whose header is 100,000 '[' (the issue's RecursionError), written directly."""
    header = b"[" * 100_000
    blob = struct.pack("<8sHBxI", b"DGEMMKB\0", 1, 0, len(header)) + header
    path = disk.entry_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    return path


def test_ls_verify_export_and_gc_go_on_past_a_crafted_entry(capsys, disk, tmp_path):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    crafted = _crafted_entry(disk, KEY_B)

    status, out, err = run_cli(capsys, "ls", "--json")
    assert status == 0 and "Traceback" not in err
    rows = {row["key"]: row for row in json.loads(out)}
    assert rows[KEY_A]["n"] == 4096 and rows[KEY_B]["compiler"].startswith("unreadable")

    status, out, err = run_cli(capsys, "export", tmp_path / "k.tar", "--no-progress", "--json")
    assert status == 1 and json.loads(out)["entries"] == 1 and json.loads(out)["refused"] == 1

    _crafted_entry(disk, KEY_B)
    status, out, err = run_cli(capsys, "verify", "--dry-run", "--no-progress", "--json")
    assert status == 1 and [bad["key"] for bad in json.loads(out)["bad"]] == [KEY_B]

    status, out, err = run_cli(capsys, "gc", "--json", "--max-age", "none")
    assert status == 0 and json.loads(out)["removed"]["corrupt"] == 1
    assert not crafted.exists() and disk.get(KEY_A) is not None


def test_ls_verify_export_and_gc_refuse_a_fifo_at_an_entry_path_without_hanging(disk, tmp_path):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    fifo = disk.entry_path(KEY_B)
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    bundle = tmp_path / "bundle.tar"
    # One process runs the four commands (a blocking open would hang it: hence the timeout).
    code = ("import sys\nfrom dgemm import cli\n"
            "codes = [cli.main(['ls']), cli.main(['verify', '--dry-run', '--no-progress']),\n"
            f"         cli.main(['export', {str(bundle)!r}, '--no-progress']),\n"
            "         cli.main(['gc', '--max-age', 'none'])]\n"
            "print('codes', *codes)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "codes 0 1 1 0", result.stdout   # export: 1 refused
    assert bundle.is_file()
    assert not fifo.exists() and disk.get(KEY_A) is not None     # removed as a bad entry


def test_ls_and_stats_survive_unverified_headers_of_the_wrong_types(capsys, disk):
    # A header is read unverified for listings: a spec of the wrong JSON types must not crash
    # the listing's formatting or sorting.
    from dgemm.jit import entry as entry_format
    for key, spec in ((KEY_A, {"kernel": ["x"], "n": "4096", "k": {}, "num_stages": {}}),
                      (KEY_B, [1, 2]), (KEY_C, {"n": 7, "kernel": "fp8_gemm"})):
        header = json.dumps({"spec": spec, "compiler": 5}).encode()
        blob = struct.pack("<8sHBxI", entry_format.MAGIC, entry_format.FORMAT_VERSION, 0,
                           len(header)) + header
        path = disk.entry_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
    status, out, err = run_cli(capsys, "ls")
    assert status == 0 and out.strip().endswith("3 entries"), err
    status, out, err = run_cli(capsys, "stats", "--json")
    assert status == 0 and json.loads(out)["local"]["entries"] == 3


def test_pull_skips_a_remote_key_that_is_not_a_cache_key(disk):
    # The key never reaches the remote: it is refused before any download.
    assert sync.pull_one(None, disk, "../../escape", {}, sync.Match()) == sync.Transfer(failed=1)
    assert sync._json_or_empty(DEEP) == {} and sync._json_or_empty("[1]") == {}
