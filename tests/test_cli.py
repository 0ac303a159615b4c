"""`dgemm-cache` subcommands, run in process through dgemm.cli.main (the sync daemon in a
subprocess, to send it SIGTERM), against a real redis-server where they need one."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from dgemm import cli
from dgemm.jit import entry
from dgemm.jit.tiers import DiskTier
from cli_helpers import disk, remote, run_cli, tampered_bundle  # noqa: F401
from redis_server import make_entry_blob, redis_server  # noqa: F401

KEY_A, KEY_B = "a1" * 32, "b2" * 32
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(capsys, *argv) -> tuple:
    """(exit status, stdout) of `dgemm-cache argv...`."""
    status, out, _ = run_cli(capsys, *argv)
    return status, out


def run_json(capsys, *argv) -> tuple:
    status, out = run(capsys, *argv, "--json")
    return status, json.loads(out)


# --- stats -------------------------------------------------------------------------------------
def test_stats_counts_local_entries_and_says_remote_is_not_configured(capsys, disk):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    status, report = run_json(capsys, "stats")
    assert status == 0 and report["local"]["entries"] == 1 and report["remote"] is None


def test_stats_in_prometheus_format_has_help_type_and_tier_labels(capsys, disk, remote):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    status, text = run(capsys, "stats", "--prometheus")
    assert status == 0
    assert "# TYPE dgemm_cache_entries gauge" in text
    assert 'dgemm_cache_entries{tier="local"} 1' in text
    assert 'dgemm_cache_entries{tier="remote"} 0' in text
    assert "dgemm_remote_up 1" in text


def test_stats_reports_cluster_counters_after_remote_activity(capsys, disk, remote):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    run(capsys, "push")
    status, report = run_json(capsys, "stats")
    assert report["remote"]["entries"] == 1 and report["remote"]["counters"]["publishes"] == 1


def test_stats_with_an_unreachable_redis_exits_3_and_says_remote_is_down(capsys, disk, remote):
    remote.kill()
    status, text = run(capsys, "stats", "--prometheus")
    assert status == cli.EXIT_NO_REMOTE and "dgemm_remote_up 0" in text


# --- ls ----------------------------------------------------------------------------------------
def test_ls_lists_local_kernels_with_their_spec(capsys, disk):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    status, rows = run_json(capsys, "ls")
    assert status == 0 and [(r["key"], r["n"], r["arch"]) for r in rows] == [
        (KEY_A, 4096, "sm_90a")]


def test_ls_remote_lists_what_redis_holds(capsys, disk, remote):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    run(capsys, "push")
    status, rows = run_json(capsys, "ls", "--remote")
    assert [r["key"] for r in rows] == [KEY_A]


# --- verify ------------------------------------------------------------------------------------
def _corrupt_local(disk, key):
    path = disk.entry_path(key)
    data = bytearray(path.read_bytes())
    data[60] ^= 0x01
    path.write_bytes(bytes(data))


def test_verify_removes_a_corrupt_local_entry_and_exits_1(capsys, disk):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    disk.put_blob(KEY_B, make_entry_blob(KEY_B))
    _corrupt_local(disk, KEY_B)
    status, report = run_json(capsys, "verify", "--no-progress")
    assert status == 1 and [bad["key"] for bad in report["bad"]] == [KEY_B]
    assert disk.entry_path(KEY_A).exists() and not disk.entry_path(KEY_B).exists()


def test_verify_of_a_clean_cache_exits_0(capsys, disk):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    assert run(capsys, "verify", "--no-progress")[0] == 0


def test_verify_dry_run_keeps_the_corrupt_entry(capsys, disk):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    _corrupt_local(disk, KEY_A)
    assert run(capsys, "verify", "--dry-run", "--no-progress")[0] == 1
    assert disk.entry_path(KEY_A).exists()


def test_verify_remote_removes_a_tampered_redis_entry(capsys, disk, remote):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    run(capsys, "push")
    remote.client().setrange("dgemm:entry:" + KEY_A, 60, b"X")
    status, report = run_json(capsys, "verify", "--remote", "--no-progress")
    assert status == 1 and report["removed"] == 1
    assert not remote.client().exists("dgemm:entry:" + KEY_A)


# --- push / pull -------------------------------------------------------------------------------
def test_push_uploads_local_only_entries_once(capsys, disk, remote):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    assert run_json(capsys, "push", "--no-progress")[1]["copied"] == 1
    assert run_json(capsys, "push", "--no-progress")[1] == {
        "copied": 0, "present": 1, "skipped": 0, "failed": 0, "bytes": 0}
    assert remote.client().exists("dgemm:entry:" + KEY_A)


def test_pull_downloads_entries_for_this_arch_and_skips_others(capsys, disk, remote, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "other-node"))
    other = DiskTier(tmp_path / "other-node")
    other.put_blob(KEY_A, make_entry_blob(KEY_A, arch="sm_90a"))
    other.put_blob(KEY_B, make_entry_blob(KEY_B, arch="sm_80"))
    run(capsys, "push")
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(disk.root))
    status, report = run_json(capsys, "pull", "--arch", "sm_90a", "--no-progress")
    assert status == 0 and (report["copied"], report["skipped"]) == (1, 1)
    assert disk.get(KEY_A) is not None and disk.get(KEY_B) is None


def test_pull_skips_entries_of_another_compiler_unless_asked(capsys, disk, remote):
    remote_tier_put(remote, KEY_A, make_entry_blob(KEY_A, compiler="nvcc 12.4"))
    assert run_json(capsys, "pull", "--arch", "sm_90a", "--no-progress")[1]["skipped"] == 1
    report = run_json(capsys, "pull", "--arch", "sm_90a", "--any-compiler", "--no-progress")[1]
    assert report["copied"] == 1


def remote_tier_put(server, key, blob):
    from cache_service.client import connect
    from cache_service.store import EntryStore
    from cache_service.namespace import Namespace
    EntryStore(connect(server.url), Namespace(), describe=entry.describe).store(key, blob)


def test_push_without_a_remote_cache_exits_3_and_names_the_variable(capsys, disk):
    assert cli.main(["push"]) == cli.EXIT_NO_REMOTE
    assert "DGEMM_REMOTE_CACHE" in capsys.readouterr().err


def test_push_to_a_dead_redis_exits_3(capsys, disk, remote):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    remote.kill()
    assert run(capsys, "push", "--no-progress")[0] == cli.EXIT_NO_REMOTE


def test_a_malformed_setting_exits_2_naming_the_variable(capsys, disk, remote, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "soon")
    assert cli.main(["push"]) == cli.EXIT_USAGE
    assert "DGEMM_REMOTE_TIMEOUT" in capsys.readouterr().err


def test_an_unknown_subcommand_exits_2(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["frobnicate"])
    assert exited.value.code == cli.EXIT_USAGE


# --- export / import ---------------------------------------------------------------------------
def test_export_then_import_moves_every_entry_to_an_empty_cache(capsys, disk, tmp_path,
                                                                monkeypatch):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    disk.put_blob(KEY_B, make_entry_blob(KEY_B))
    bundle = tmp_path / "kernels.tar"
    assert run_json(capsys, "export", str(bundle), "--no-progress")[1]["entries"] == 2
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "air-gapped"))
    status, report = run_json(capsys, "import", str(bundle))
    assert status == 0 and report["entries"] == 2
    assert DiskTier(tmp_path / "air-gapped").get(KEY_B).blob == disk.get(KEY_B).blob


def test_import_refuses_a_tampered_entry_and_writes_only_the_good_ones(capsys, disk, tmp_path,
                                                                       monkeypatch):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    disk.put_blob(KEY_B, make_entry_blob(KEY_B))
    run(capsys, "export", str(tmp_path / "good.tar"), "--no-progress")
    tampered_bundle(tmp_path / "good.tar", tmp_path / "bad.tar", KEY_B)
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "target"))
    status, report = run_json(capsys, "import", str(tmp_path / "bad.tar"))
    target = DiskTier(tmp_path / "target")
    assert status == 1 and (report["entries"], report["refused"]) == (1, 1)
    assert target.get(KEY_A) is not None and not target.entry_path(KEY_B).exists()


def test_import_refuses_unsigned_entries_when_a_secret_is_set(capsys, disk, tmp_path,
                                                              monkeypatch):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    run(capsys, "export", str(tmp_path / "unsigned.tar"), "--no-progress")
    monkeypatch.setenv("DGEMM_CACHE_SECRET", "s3cret")
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "target"))
    status, report = run_json(capsys, "import", str(tmp_path / "unsigned.tar"))
    assert status == 1 and report["refused"] == 1
    assert not DiskTier(tmp_path / "target").entry_path(KEY_A).exists()


def test_import_of_a_file_that_is_not_a_bundle_exits_2(capsys, disk, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    assert cli.main(["import", str(tmp_path / "notes.txt")]) == cli.EXIT_USAGE
    assert "dgemm-cache export" in capsys.readouterr().err


def test_import_with_push_also_uploads(capsys, disk, remote, tmp_path, monkeypatch):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    run(capsys, "export", str(tmp_path / "k.tar"), "--no-progress")
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "target"))
    assert run_json(capsys, "import", str(tmp_path / "k.tar"), "--push")[1]["pushed"] == 1
    assert remote.client().exists("dgemm:entry:" + KEY_A)


# --- sync --------------------------------------------------------------------------------------
def test_sync_once_pushes_local_entries_and_pulls_remote_ones(capsys, disk, remote):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    remote_tier_put(remote, KEY_B, make_entry_blob(KEY_B))
    status, totals = run_json(capsys, "sync", "--once", "--arch", "sm_90a")
    assert status == 0 and totals["copied"] == 2
    assert disk.get(KEY_B) is not None and remote.client().exists("dgemm:entry:" + KEY_A)


def test_the_sync_daemon_follows_new_publications_and_exits_0_on_sigterm(disk, remote, tmp_path):
    environment = dict(os.environ, PYTHONPATH=REPO)
    daemon = subprocess.Popen([sys.executable, "-m", "dgemm.cli", "sync", "--arch", "sm_90a",
                               "--json"], cwd=REPO, env=environment, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        # Its first reconcile is done (and logged) before this entry exists, so only
        # following the publication can bring it to disk.
        log = []
        threading.Thread(target=lambda: log.extend(daemon.stderr), daemon=True).start()
        _wait_for(lambda: any("dgemm sync: pushed" in line for line in log), "a reconcile")
        remote_tier_put(remote, KEY_B, make_entry_blob(KEY_B))
        _wait_for(lambda: disk.entry_path(KEY_B).exists(), "the published entry on disk")
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)     # its output is a few lines: the pipe cannot fill
        out = daemon.stdout.read()
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0, "".join(log)
    assert json.loads(out)["copied"] == 1


def _wait_for(condition, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# --- delegated jobs ----------------------------------------------------------------------------
def test_gc_is_delegated_to_the_cleanup_job(capsys, disk):
    disk.put_blob(KEY_A, make_entry_blob(KEY_A))
    status, report = run_json(capsys, "gc", "--dry-run")
    assert status == 0 and "errors" in report


def test_prewarm_is_delegated_to_the_prewarm_job(capsys):
    with pytest.raises(SystemExit) as exited:     # its own required --manifest/--preset
        cli.main(["prewarm"])
    assert exited.value.code == cli.EXIT_USAGE
    assert "--manifest" in capsys.readouterr().err
