"""What an ops engineer running `dgemm-cache` on a cluster meets (issue 16): honest exit codes
when Redis cannot be filled, a prompt Ctrl-C, configuration checked before any work, mistakes
refused, messages instead of tracebacks, readable prewarm output, -v and --dry-run.

Real redis-servers (tests/redis_server.py, with an ACL user where a password matters), real
`dgemm-cache` subprocesses where a signal or a closed pipe is the point (each under a
timeout), and the trivial test kernels (conftest's `test_kernels`) for compiles.
"""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dgemm import cli
from dgemm.jit import env
from dgemm.jit.tiers import DiskTier
from dgemm.jobs import manifest, prewarm
from cli_helpers import live_children, run_cli, tampered_bundle
from redis_server import RedisServer, free_port, make_entry_blob, redis_server  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
KEY_A, KEY_B = "a1" * 32, "b2" * 32
SMALL_MANIFEST = {"dense": {"m": [1, 32, 65, 128], "nk": [[256, 512], [512, 512]]}}


@pytest.fixture
def shapes(tmp_path) -> Path:
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(SMALL_MANIFEST))
    return path


@pytest.fixture
def cache(fresh_dgemm_cache, test_kernels, monkeypatch) -> Path:
    """An empty cache dir, compiling the trivial test kernels, outside torchrun."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "2")
    return fresh_dgemm_cache


@pytest.fixture
def password_redis(tmp_path):
    """A redis-server that only the ACL user alice (password 's3cret') may use."""
    server = RedisServer(tmp_path / "acl-redis", user=("alice", "s3cret")).start()
    yield server
    server.stop()


def n_specs() -> int:
    return len(manifest.specs_for(manifest.problems(SMALL_MANIFEST), 132, "sm_90a"))


def prewarm_json(capsys, shapes, *extra) -> tuple:
    # One worker: enough for the trivial test kernels, and a second spawn is the slow part.
    status, out, err = run_cli(capsys, "prewarm", "--manifest", shapes, "--jobs", "1",
                               "--no-progress", "--json", *extra)
    return status, json.loads(out), err


def entries_in(directory: Path) -> list:
    return sorted(directory.rglob("*.kbin"))


def redis_keys(server, **client_options) -> set:
    client = server.client()
    return {key.decode() for key in client.keys("dgemm:entry:*")}


def dgemm_cache_process(*argv, env_extra=None, **popen) -> subprocess.Popen:
    environment = dict(os.environ, PYTHONPATH=str(REPO), **(env_extra or {}))
    return subprocess.Popen([sys.executable, "-m", "dgemm.cli", *map(str, argv)], cwd=REPO,
                            env=environment, **popen)


# ------------------------------------------------------------------------------------------------
# Defect 1: prewarm says how much reached Redis, and exits 3 when it could not fill it
# ------------------------------------------------------------------------------------------------
def test_prewarm_against_a_down_redis_compiles_locally_and_exits_3(capsys, cache, shapes,
                                                                   monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://127.0.0.1:{free_port()}/0")
    status, report, err = prewarm_json(capsys, shapes)
    assert status == prewarm.EXIT_REMOTE == 3, err
    assert report["compiled"] == report["specs_total"] == n_specs()
    assert len(entries_in(cache)) == n_specs()                 # the local cache is filled
    remote = report["remote_status"]
    assert (remote["present"], remote["uploaded"], remote["missing"]) == (0, 0, n_specs())
    assert "Connection refused" in remote["error"]
    assert "is unavailable" in err and "exit 3" in err         # said up front, once
    assert err.count("is unavailable") == 1


def test_prewarm_with_a_wrong_or_missing_password_exits_3_and_says_so(capsys, cache, shapes,
                                                                      password_redis,
                                                                      monkeypatch):
    port = password_redis.port
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://alice:Wr0ngPw@127.0.0.1:{port}/0")
    status, report, err = prewarm_json(capsys, shapes)
    assert status == 3 and report["remote_status"]["missing"] == n_specs()
    assert "refused the user name or password" in report["remote_status"]["error"]
    assert "Wr0ngPw" not in json.dumps(report) + err           # the password is never shown

    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://127.0.0.1:{port}/0")
    status, report, err = prewarm_json(capsys, shapes)
    assert status == 3 and report["compiled"] == 0             # cached locally by the 1st run
    assert "Redis requires a password" in report["remote_status"]["error"]
    assert "redis://user:password@host:port/db" in err
    assert "HELLO must be called" not in err + json.dumps(report)
    assert not redis_keys(password_redis)

    # Fixed URL: the rerun compiles nothing and uploads everything the remote lacks.
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", password_redis.url)
    status, report, _ = prewarm_json(capsys, shapes)
    assert status == 0
    assert (report["compiled"], report["remote_status"]["uploaded"]) == (0, n_specs())
    assert len(redis_keys(password_redis)) == n_specs()


def test_prewarm_verifies_at_the_end_that_redis_holds_every_kernel(capsys, cache, shapes,
                                                                   redis_server, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    status, report, _ = prewarm_json(capsys, shapes)
    assert status == 0
    assert report["remote_status"] == {"kernels": n_specs(), "present": n_specs(),
                                       "uploaded": 0, "missing": 0, "error": None}
    assert {k["remote"] for k in report["kernels"]} == {"present"}
    # Redis lost one (evicted, flushed): the next run finds it missing and puts it back.
    lost = report["kernels"][0]["key"]
    redis_server.client().delete(f"dgemm:entry:{lost}")
    status, report, _ = prewarm_json(capsys, shapes)
    assert status == 0 and report["remote_status"]["uploaded"] == 1
    assert [k["key"] for k in report["kernels"] if k["remote"] == "uploaded"] == [lost]
    assert len(redis_keys(redis_server)) == n_specs()


def test_prewarm_into_a_full_redis_exits_3(capsys, cache, shapes, redis_server, monkeypatch):
    redis_server.client().config_set("maxmemory", "1")         # noeviction: every write OOM
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    status, report, _ = prewarm_json(capsys, shapes)
    assert status == 3, report["remote_status"]
    assert report["remote_status"]["missing"] == n_specs()
    assert "maxmemory" in report["remote_status"]["error"]


def test_prewarm_help_and_the_readme_give_the_exit_statuses():
    # `--help` in a subprocess: it must answer without torch, and show the list whole.
    job = dgemm_cache_process("prewarm", "--help", stdout=subprocess.PIPE, text=True)
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 0
    statuses = out[out.index("exit status:"):]
    for status in ("0 ", "1 ", "2 ", "3 ", "130 ", "143 "):
        assert f"\n  {status}" in statuses or f" {status.strip()} by SIGTERM" in statuses, out
    assert "could not take them" in statuses and "[rank I/N]" in statuses
    readme = (REPO / "README.md").read_text()
    prewarm_section = readme[readme.index("### Prewarm"):readme.index("### Cleanup")]
    for phrase in ("3 when", "130", "143", "[rank I/N]", "--dry-run"):
        assert phrase in prewarm_section, phrase


# ------------------------------------------------------------------------------------------------
# Defect 2: Ctrl-C and SIGTERM stop prewarm at once, with the partial report
# ------------------------------------------------------------------------------------------------
def _alive(pids: set) -> set:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _wait_for(condition, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _stop_report(job, out: str, err: str, signal_name: str, cache: Path) -> None:
    """The job exited 128 + the signal, quietly, with the report of a run stopped at once."""
    assert job.returncode == 128 + signal.Signals[signal_name], err
    assert "Traceback" not in err, err
    report = json.loads(out)
    assert report["interrupted"] == signal_name
    assert report["unfinished"] == n_specs() and report["compiled"] == 0
    assert not entries_in(cache)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_ctrl_c_stops_prewarm_within_seconds_with_the_partial_report(tmp_path, cache, shapes):
    marker = tmp_path / "compiling"
    job = dgemm_cache_process(
        "prewarm", "--manifest", shapes, "--jobs", "2", "--no-progress", "--json",
        env_extra={"DGEMM_TEST_PAUSE": "compile:60", "DGEMM_TEST_PAUSE_MARKER": str(marker)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    workers = set()
    try:
        _wait_for(marker.exists, "a worker to start compiling")
        workers = live_children(job.pid)
        assert workers
        # As a terminal's Ctrl-C does: the whole process group (job and workers) gets it.
        sent = time.monotonic()
        os.killpg(job.pid, signal.SIGINT)
        out, err = job.communicate(timeout=30)
        took = time.monotonic() - sent
        _wait_for(lambda: not _alive(workers), "the workers to end", timeout_s=10)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        for pid in _alive(workers):
            os.kill(pid, signal.SIGKILL)
    assert took < 10, f"prewarm took {took:.1f} s to stop"     # a hang bound; ~1 s in practice
    _stop_report(job, out, err, "SIGINT", cache)


FAKE_NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 12.4, V12.4.131"; exit 0; fi
echo $$ >> "$FAKE_NVCC_PIDS"
exec sleep 60
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_a_sigterm_to_the_job_alone_ends_its_workers_and_their_nvcc(tmp_path, cache, shapes):
    # A container runtime or `kill PID` signals the job only, not its process group: the
    # job must end its workers and the compilers they run, not leave them running.
    nvcc, pids = tmp_path / "nvcc", tmp_path / "nvcc.pids"
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(0o755)
    job = dgemm_cache_process(
        "prewarm", "--manifest", shapes, "--jobs", "2", "--no-progress", "--json",
        env_extra={"DGEMM_JIT_COMPILER": "nvcc", "DGEMM_NVCC": str(nvcc),
                   "FAKE_NVCC_PIDS": str(pids)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    left = set()
    try:
        _wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2,
                  "both workers to start nvcc")
        left = live_children(job.pid) | {int(pid) for pid in pids.read_text().split()}
        job.send_signal(signal.SIGTERM)
        out, err = job.communicate(timeout=30)
        _wait_for(lambda: not _alive(left), "the workers and compilers to end", timeout_s=10)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        for pid in _alive(left):
            os.kill(pid, signal.SIGKILL)
    _stop_report(job, out, err, "SIGTERM", cache)


# ------------------------------------------------------------------------------------------------
# Defect 3: configuration checked once, before any work
# ------------------------------------------------------------------------------------------------
BAD_SETTINGS = [
    ({"DGEMM_JIT_COMPILER": "foo"}, "DGEMM_JIT_COMPILER"),
    ({"DGEMM_LOCK_TIMEOUT": "abc"}, "DGEMM_LOCK_TIMEOUT"),
    ({"DGEMM_REMOTE_TIMEOUT": "soon"}, "DGEMM_REMOTE_TIMEOUT"),     # read without a remote too
    ({"DGEMM_REMOTE_NAMESPACE": "a:b"}, "DGEMM_REMOTE_NAMESPACE"),
    ({"DGEMM_FORCE_PORTABLE": "perhaps"}, "DGEMM_FORCE_PORTABLE"),
    ({"DGEMM_AUTOTUNE_TOP_K": "99"}, "DGEMM_AUTOTUNE_TOP_K"),
    ({"DGEMM_AUTOTUNE": "maybe"}, "DGEMM_AUTOTUNE"),
    ({"DGEMM_JIT_COMPILER": "nvcc", "DGEMM_NVCC": "/nonexistent/nvcc"}, "DGEMM_NVCC"),
    ({"DGEMM_CSRC_DIR": "/nonexistent/csrc"}, "DGEMM_CSRC_DIR"),
]


@pytest.mark.parametrize("settings, named", BAD_SETTINGS, ids=[n for _, n in BAD_SETTINGS])
def test_prewarm_refuses_a_bad_setting_once_before_compiling(capsys, cache, shapes, monkeypatch,
                                                             settings, named):
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    started = time.monotonic()
    status, out, err = run_cli(capsys, "prewarm", "--manifest", shapes, "--no-progress")
    assert status == 2, err
    message = [line for line in err.splitlines() if line.strip()]
    assert len(message) == 1 and named in message[0], err
    assert not entries_in(cache) and out == ""
    assert time.monotonic() - started < 30          # no pool of workers was started


@pytest.mark.parametrize("command", [["stats"], ["ls"], ["verify"], ["push"], ["export", "x.tar"],
                                     ["pull"], ["sync", "--once"], ["gc", "--dry-run"]])
def test_every_command_reads_every_setting_before_working(capsys, cache, monkeypatch, command):
    monkeypatch.setenv("DGEMM_LOCK_TIMEOUT", "abc")
    status, _, err = run_cli(capsys, *command)
    assert status == 2 and "DGEMM_LOCK_TIMEOUT='abc'" in err


@pytest.mark.parametrize("kind", ["a-file", "cannot-be-created"])
def test_an_unusable_cache_dir_is_refused_once_before_compiling(capsys, cache, shapes, tmp_path,
                                                                monkeypatch, kind):
    if kind == "a-file":
        unusable = tmp_path / "oops"
        unusable.write_text("a file")
    else:                   # not even root may create a directory in /proc
        unusable = Path("/proc") / f"dgemm-cache-{os.getpid()}"
        if not Path("/proc/self").exists():
            pytest.skip("needs Linux's /proc")
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(unusable))
    commands = [["prewarm", "--manifest", shapes, "--no-progress"], ["pull"]]
    if kind == "a-file":    # a cache not created yet is no error for a command that only reads
        commands.append(["stats"])
    for argv in commands:
        status, _, err = run_cli(capsys, *argv)
        assert status == 2, (argv, err)
        assert str(unusable) in err and "DGEMM_CACHE_DIR" in err
        assert len(err.strip().splitlines()) == 1


def test_a_cache_dir_others_can_write_is_refused_before_compiling(capsys, cache, shapes,
                                                                  tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(shared))
    status, _, err = run_cli(capsys, "prewarm", "--manifest", shapes, "--no-progress")
    assert status == 2 and "chmod 700" in err
    assert not entries_in(shared)


def test_an_unknown_dgemm_variable_is_named_as_a_likely_typo(capsys, cache, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHES", "redis://elsewhere:6379/0")
    status, _, err = run_cli(capsys, "stats")
    assert status == 0 and "DGEMM_REMOTE_CACHES is not a dgemm setting" in err


def test_env_knows_every_dgemm_variable_the_package_reads():
    source = "".join(path.read_text() for path in (REPO / "dgemm").rglob("*.py"))
    read = set(re.findall(r"\"(DGEMM_[A-Z_]+)\"", source)) - {"DGEMM_REMOTE_"}
    assert read <= set(env.KNOWN_VARIABLES), read - set(env.KNOWN_VARIABLES)


# ------------------------------------------------------------------------------------------------
# Defect 4: mistakes refused
# ------------------------------------------------------------------------------------------------
def test_prewarm_arch_sm_90_without_portable_is_refused_with_the_likely_fix(capsys, cache,
                                                                            shapes):
    status, _, err = run_cli(capsys, "prewarm", "--manifest", shapes, "--arch", "sm_90",
                             "--no-progress")
    assert status == 2 and "did you mean --arch sm_90a" in err and "--portable" in err


def test_prewarm_portable_builds_what_force_portable_runs_on_hopper(capsys, cache, shapes):
    status, report, _ = prewarm_json(capsys, shapes, "--arch", "sm_90", "--portable",
                                     "--dry-run")
    assert status == 0
    assert {k["spec"]["kernel"] for k in report["kernels"]} == {"fp8_gemm_portable"}
    _, on_hopper, _ = prewarm_json(capsys, shapes, "--arch", "sm_90a", "--portable",
                                   "--dry-run")
    assert [k["key"] for k in on_hopper["kernels"]] == [k["key"] for k in report["kernels"]]


@pytest.mark.parametrize("arch", ["foo", "sm90a", "90a", "sm_90b"])
def test_pull_refuses_an_arch_that_is_not_one(capsys, cache, redis_server, monkeypatch, arch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    status, _, err = run_cli(capsys, "pull", "--arch", arch, "--no-progress")
    assert status == 2 and "--arch" in err and "sm_90a" in err


@pytest.mark.parametrize("command", [["gc"], ["stats"], ["ls"], ["verify"],
                                     ["export", "k.tar"], ["clear"]], ids=lambda c: c[0])
def test_a_mistyped_cache_dir_is_refused_not_read_as_empty(capsys, cache, tmp_path, command):
    status, out, err = run_cli(capsys, *command, "--cache-dir", tmp_path / "dgemm-cahce")
    assert status == 2 and "dgemm-cahce" in err and "does not exist" in err, out + err
    assert not (tmp_path / "dgemm-cahce").exists()


def test_stats_on_a_cache_not_created_yet_says_so(capsys, cache):
    status, out, _ = run_cli(capsys, "stats")
    assert status == 0 and "no cache yet" in out


# ------------------------------------------------------------------------------------------------
# Defect 5: no raw tracebacks, messages that name the problem
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["stats"], ["ls"], ["prewarm", "--dry-run", "--manifest"]],
                         ids=lambda c: c[0])
def test_a_reader_that_left_ends_the_command_quietly(cache, shapes, command):
    disk = DiskTier(cache)
    for index in range(300):                # ls prints more than a pipe holds
        key = f"{index:064x}"
        disk.put_blob(key, make_entry_blob(key))
    argv = command + [shapes] if command[0] == "prewarm" else command
    read_end, write_end = os.pipe()
    os.close(read_end)                      # `| head -1` that has already exited
    try:
        job = dgemm_cache_process(*argv, stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    _, err = job.communicate(timeout=120)
    assert job.returncode == cli.EXIT_STDOUT_CLOSED == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_import_names_each_refused_kernel_and_the_reason(capsys, cache, tmp_path, monkeypatch):
    disk = DiskTier(cache)
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    disk.put_blob(KEY_B, make_entry_blob(KEY_B))
    run_cli(capsys, "export", tmp_path / "good.tar", "--no-progress")
    tampered_bundle(tmp_path / "good.tar", tmp_path / "bad.tar", KEY_B)
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "target"))
    status, out, _ = run_cli(capsys, "import", tmp_path / "bad.tar")
    assert status == 1 and "1 refused" in out
    refused = [line for line in out.splitlines() if "refused " + KEY_B[:12] in line]
    assert len(refused) == 1, out
    assert "fp8_gemm normal n=4096 k=7168 sm_90a" in refused[0]
    assert "sha256 differs" in refused[0]

    monkeypatch.setenv("DGEMM_CACHE_SECRET", "s3cret")
    status, out, _ = run_cli(capsys, "import", tmp_path / "good.tar", "--json")
    report = json.loads(out)
    assert status == 1 and {r["key"] for r in report["refusals"]} == {KEY_A, KEY_B}
    assert all("unsigned" in r["reason"] for r in report["refusals"])


@pytest.mark.parametrize("command", [["push", "--no-progress"], ["stats"]])
def test_a_missing_redis_password_is_explained_not_quoted(capsys, cache, password_redis,
                                                          monkeypatch, command):
    DiskTier(cache).put_blob(KEY_A, make_entry_blob(KEY_A))
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://127.0.0.1:{password_redis.port}/0")
    status, out, err = run_cli(capsys, *command)
    assert status == 3
    assert "Redis requires a password" in out + err
    assert "redis://user:password@host:port/db" in out + err
    assert "HELLO must be called" not in out + err


@pytest.mark.parametrize("command", [["push", "--no-progress"], ["stats"],
                                     ["pull", "--no-progress"]])
def test_commands_against_a_down_redis_do_not_talk_of_compiling(cache, command):
    DiskTier(cache).put_blob(KEY_A, make_entry_blob(KEY_A))
    job = dgemm_cache_process(*command, env_extra={
        "DGEMM_REMOTE_CACHE": f"redis://127.0.0.1:{free_port()}/0"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 3, err
    assert re.search("unavailable|unreachable", out + err), out + err
    assert "locally" not in out + err and "compil" not in out + err
    assert len(err.splitlines()) <= 1, err          # the outage said once, not twice


def test_push_with_nothing_to_push_still_says_a_down_redis_is_unreachable(capsys, cache,
                                                                         monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://127.0.0.1:{free_port()}/0")
    status, out, err = run_cli(capsys, "push", "--no-progress")
    assert status == 3 and "unavailable" in err and "pushed" not in out


def test_the_walk_says_it_builds_locally_when_redis_is_down(cache, spec, monkeypatch, caplog):
    import dgemm.jit
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://127.0.0.1:{free_port()}/0")
    with caplog.at_level(logging.WARNING, logger="dgemm.remote"):
        dgemm.jit.ensure_compiled(spec)
    text = caplog.text
    assert "is unavailable" in text and "not trying it again" in text
    assert f"building {dgemm.jit.ensure_compiled(spec)[:12]} (and what else is missing) " \
           f"locally" in text


# ------------------------------------------------------------------------------------------------
# Prewarm output under torchrun, -v and --dry-run
# ------------------------------------------------------------------------------------------------
def test_m_values_print_as_ranges_that_parse_back():
    values = list(range(1, 257)) + [512] + list(range(1024, 8193, 1024))
    text = manifest.format_m_values(values)
    assert text == "1-256, 512, 1024-8192:1024"
    assert manifest.parse_m_range(text) == values
    for values in ([1], [5, 9], [5, 6], [400, 512, 640, 768], [1, 3, 5, 6, 7, 100]):
        assert manifest.parse_m_range(manifest.format_m_values(values)) == sorted(values)


def test_prewarm_text_report_shows_m_as_ranges_and_how_many_kernels_redis_holds(
        capsys, cache, shapes, redis_server, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    status, out, _ = run_cli(capsys, "prewarm", "--manifest", shapes, "--m-range",
                             "1-2048,4096-16384:1024", "--jobs", "1", "--no-progress")
    assert status == 0
    assert re.search(r"remote cache +redis://\S+: (\d+) of \1 kernels there", out), out
    kernel_lines = [line for line in out.splitlines() if "(M " in line]
    assert kernel_lines and max(len(line) for line in kernel_lines) < 200, out
    assert any(re.search(r"\(M [^)]*\d+-\d+", line) for line in kernel_lines)


def test_under_torchrun_every_line_names_the_rank(capsys, cache, shapes, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    status, out, err = run_cli(capsys, "-v", "prewarm", "--manifest", shapes, "--jobs", "1")
    assert status == 0
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert lines and all(line.startswith("[rank 1/2] ") for line in lines), out + err


def test_verbose_prewarm_tells_per_kernel_which_tier_answered(capsys, cache, shapes,
                                                              redis_server, monkeypatch):
    status, _, err = run_cli(capsys, "-v", "prewarm", "--manifest", shapes, "--jobs", "1")
    assert status == 0
    assert err.count("compiled in") == n_specs() and f"[{n_specs()}/{n_specs()}]" in err
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    status, _, err = run_cli(capsys, "-v", "prewarm", "--manifest", shapes, "--jobs", "1")
    assert status == 0
    assert err.count("cached on local disk") == n_specs()
    assert err.count("uploaded to the remote cache") == n_specs()
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(cache.parent / "second-node"))
    status, _, err = run_cli(capsys, "-v", "prewarm", "--manifest", shapes, "--jobs", "1")
    assert status == 0 and err.count("downloaded from the remote cache") == n_specs()


def test_verbose_pull_logs_each_kernel(capsys, cache, redis_server, monkeypatch, caplog):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(cache.parent / "other-node"))
    other = DiskTier(cache.parent / "other-node")
    other.put_blob(KEY_A, make_entry_blob(KEY_A, arch="sm_90a"))
    other.put_blob(KEY_B, make_entry_blob(KEY_B, arch="sm_80"))
    run_cli(capsys, "push", "--no-progress")
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(cache))
    with caplog.at_level(logging.INFO, logger="dgemm.sync"):
        status, _, _ = run_cli(capsys, "-v", "pull", "--arch", "sm_90a", "--any-compiler",
                               "--no-progress")
    assert status == 0
    lines = [record.getMessage() for record in caplog.records if record.name == "dgemm.sync"]
    assert any(line.startswith(f"pull {KEY_A[:12]}: downloaded") for line in lines), lines
    assert any(line.startswith(f"pull {KEY_B[:12]}: skipped") and "sm_80" in line
               and "not arch sm_90a" in line for line in lines), lines


def test_dry_run_lists_the_kernels_and_where_each_is_cached_compiling_nothing(
        capsys, cache, shapes, redis_server, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    status, before, _ = prewarm_json(capsys, shapes, "--dry-run")
    assert status == 0 and before["to_compile"] == before["specs_in_shard"] == n_specs()
    assert not entries_in(cache) and not redis_keys(redis_server)
    assert all(k["m_values"] and k["local"] is False and k["remote"] is False
               for k in before["kernels"])
    _, compiled, _ = prewarm_json(capsys, shapes)
    status, after, _ = prewarm_json(capsys, shapes, "--dry-run")
    assert status == 0 and after["to_compile"] == 0
    assert all(k["local"] and k["remote"] for k in after["kernels"])
    assert {k["key"] for k in after["kernels"]} == {k["key"] for k in compiled["kernels"]}


def test_dry_run_text_and_a_down_redis(capsys, cache, shapes, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://127.0.0.1:{free_port()}/0")
    status, out, _ = run_cli(capsys, "prewarm", "--manifest", shapes, "--dry-run")
    assert status == 3
    assert "unavailable" in out and f"{n_specs()} to compile" in out
    assert not entries_in(cache)
