"""The operator features of `dgemm-cache` (issue 16): --version and dgemm.__version__, --help
without torch, --cache-dir and --remote on every subcommand, doctor, clear (local and remote),
gc --remote, and Redis Sentinel URLs. Every remote case runs against real redis-server
processes (a Sentinel is `redis-server sentinel.conf --sentinel` on a loopback port)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import filelock
import pytest
import redis

import dgemm.jit
from cache_service.client import check_url, connect, parse_sentinel_url, redact
from cache_service.namespace import Namespace
from cache_service.store import EntryStore
from dgemm import cli
from dgemm.jit import entry
from dgemm.jit.cache import COMPILED, REMOTE
from dgemm.jit.errors import ConfigError
from dgemm.jit.tiers import DiskTier
from cli_helpers import disk, remote, run_cli, run_cli_json  # noqa: F401
from redis_server import REDIS_SERVER, RedisServer, free_port, make_entry_blob
from redis_server import redis_server  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
KEYS = [f"{i:02x}" * 32 for i in range(1, 7)]


def usage_error(capsys, *argv) -> str:
    """stderr of a command argparse refuses (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main([str(arg) for arg in argv])
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def store_of(server, namespace: str = "dgemm") -> EntryStore:
    return EntryStore(connect(server.url), Namespace(namespace), describe=entry.describe)


def run_in_subprocess(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=timeout)


# --- --version, dgemm.__version__ ----------------------------------------------------------------
def test_version_is_written_once_and_shown_by_the_package_and_the_command(capsys):
    from dgemm._version import __version__
    assert dgemm.__version__ == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", __version__)
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]$', pyproject, re.M)
    assert 'version = {attr = "dgemm._version.__version__"}' in pyproject
    assert not re.search(r'^version = "', pyproject, re.M)       # no second copy
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"dgemm-cache {__version__}"


# --- --help and --version import neither torch nor redis -----------------------------------------
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["prewarm", "--help"],
                                  ["gc", "--help"], ["clear", "--help"], ["doctor", "--help"],
                                  ["ls", "--help"]], ids=" ".join)
def test_help_and_version_answer_without_importing_torch_or_redis(argv):
    result = run_in_subprocess(
        "import sys\nfrom dgemm.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit as done:\n    code = done.code\n"
        "print(code, 'torch' in sys.modules, 'redis' in sys.modules, file=sys.stderr)")
    assert result.returncode == 0, result.stderr
    assert result.stderr.split()[-3:] == ["0", "False", "False"], result.stderr
    assert "usage: dgemm-cache" in result.stdout or "dgemm-cache " in result.stdout


def test_import_dgemm_is_lazy_but_every_public_name_still_works():
    result = run_in_subprocess(
        "import sys\nimport dgemm\nassert 'torch' not in sys.modules\n"
        "assert callable(dgemm.fp8_gemm_nt) and 'torch' in sys.modules\n"
        "from dgemm import *\n"
        "assert callable(calc_diff) and callable(m_grouped_fp8_gemm_nt_masked)\n"
        "assert dgemm.jit.stats is not None and dgemm.utils.ceil_div(5, 2) == 3\n"
        "assert set(dgemm.__all__) <= set(dir(dgemm))\n"
        "try:\n    dgemm.no_such_name\nexcept AttributeError as error:\n    print(error)\n")
    assert result.returncode == 0, result.stderr
    assert "has no attribute 'no_such_name'" in result.stdout


# --- --cache-dir and --remote on every subcommand ------------------------------------------------
def test_cache_dir_option_after_or_before_the_subcommand_picks_the_cache(capsys, disk,
                                                                          tmp_path):
    other = DiskTier(tmp_path / "other")
    other.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    environment_before = os.environ["DGEMM_CACHE_DIR"]
    for argv in (["stats", "--cache-dir", other.root], ["--cache-dir", other.root, "stats"]):
        status, report = run_cli_json(capsys, *argv)
        assert status == 0 and report["local"] == {"dir": str(other.root), "exists": True,
                                                   "entries": 1,
                                                   "bytes": report["local"]["bytes"]}
    assert os.environ["DGEMM_CACHE_DIR"] == environment_before     # restored after the command
    assert run_cli_json(capsys, "stats")[1]["local"]["entries"] == 0


def test_the_option_after_the_subcommand_wins_over_the_one_before(capsys, disk, tmp_path):
    other = DiskTier(tmp_path / "other")
    other.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    status, report = run_cli_json(capsys, "--cache-dir", tmp_path / "nowhere", "stats",
                              "--cache-dir", other.root)
    assert report["local"]["dir"] == str(other.root)


def test_verbose_goes_before_or_after_the_subcommand():
    parse = cli.build_parser().parse_args
    assert parse(["-v", "stats"]).verbose and parse(["stats", "-v"]).verbose
    assert not parse(["stats"]).verbose


def test_remote_option_replaces_the_environments_redis_for_one_command(capsys, disk,
                                                                       redis_server,
                                                                       monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", f"redis://127.0.0.1:{free_port()}/0")   # dead
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.5")
    disk.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    assert run_cli(capsys, "push", "--no-progress")[0] == cli.EXIT_NO_REMOTE
    status, report = run_cli_json(capsys, "push", "--no-progress", "--remote", redis_server.url)
    assert status == 0 and report["copied"] == 1
    assert redis_server.client().exists("dgemm:entry:" + KEYS[0])
    status, report = run_cli_json(capsys, "--remote", redis_server.url, "stats")
    assert status == 0 and report["remote"]["entries"] == 1
    # On ls, --remote URL also means "list that Redis".
    status, rows = run_cli_json(capsys, "ls", "--remote", redis_server.url)
    assert status == 0 and [row["key"] for row in rows] == [KEYS[0]]


def test_remote_none_turns_the_remote_off_for_one_command(capsys, disk, remote):
    status, report = run_cli_json(capsys, "stats", "--remote", "none")
    assert status == 0 and report["remote"] is None
    assert run_cli(capsys, "push", "--remote", "none")[0] == cli.EXIT_NO_REMOTE


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/abc", "http://127.0.0.1/0",
                                 "redis+sentinel://127.0.0.1:26379/"])
def test_a_malformed_remote_option_is_a_usage_error_naming_the_fix(capsys, disk, url):
    err = usage_error(capsys, "stats", "--remote", url)
    assert "is not a usable Redis URL" in err and "redis+sentinel://" in err


def test_the_remote_option_never_shows_the_password(capsys, disk):
    err = usage_error(capsys, "push", "--remote", "redis://u:hunter2@127.0.0.1:6379/x")
    assert "hunter2" not in err and "u:***@" in err


# --- doctor ------------------------------------------------------------------------------------
def doctor(capsys, *argv) -> tuple:
    status, report = run_cli_json(capsys, "doctor", *argv)
    assert report["exit_status"] == status
    return status, {check["name"]: check for check in report["checks"]}


def test_doctor_is_healthy_with_a_private_cache_and_a_reachable_redis(capsys, disk, tmp_path,
                                                                      monkeypatch):
    server = RedisServer(tmp_path / "redis", user=("ops", "pa55word")).start()
    try:
        monkeypatch.setenv("DGEMM_REMOTE_CACHE", server.url)
        monkeypatch.setenv("DGEMM_CACHE_SECRET", "the-cluster-secret")
        disk.put_blob(KEYS[0], make_entry_blob(KEYS[0], secret=b"the-cluster-secret"))
        status, checks = doctor(capsys)
        assert status == 0, checks
        assert checks["cache dir"]["status"] == "ok" and "1 entries" in checks["cache dir"]["value"]
        assert checks["remote"]["status"] == "ok" and "reachable" in checks["remote"]["value"]
        assert checks["secret"]["value"].startswith("set")
        text = run_cli(capsys, "show-config")[1]             # the alias; plain text
        assert "ops:***@" in text and "dgemm" in text
        assert "pa55word" not in text and "the-cluster-secret" not in text
    finally:
        server.stop()


def test_doctor_fails_when_the_remote_does_not_answer(capsys, disk, remote):
    remote.kill()
    status, checks = doctor(capsys)
    assert status == 1 and checks["remote"]["status"] == "fail"
    assert "ConnectionError" in checks["remote"]["detail"]


def test_doctor_fails_on_a_cache_dir_another_user_could_write(capsys, disk):
    disk.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    disk.root.chmod(0o777)
    status, checks = doctor(capsys)
    assert status == 1 and checks["cache dir"]["status"] == "fail"
    assert "chmod 700" in checks["cache dir"]["detail"]


def test_doctor_says_a_missing_cache_dir_will_be_created(capsys, disk):
    status, checks = doctor(capsys)
    assert status == 0 and "created (0700) on first use" in checks["cache dir"]["value"]


@pytest.mark.parametrize("name, value", [("DGEMM_LOCK_TIMEOUT", "abc"),
                                         ("DGEMM_JIT_COMPILER", "foo"),
                                         ("DGEMM_REMOTE_CACHE", "redis://h:6379/abc"),
                                         ("DGEMM_DISABLE_JIT", "maybe")])
def test_doctor_exits_2_for_a_malformed_setting_and_still_checks_the_rest(capsys, disk,
                                                                          monkeypatch, name,
                                                                          value):
    monkeypatch.setenv(name, value)
    status, checks = doctor(capsys)
    assert status == 2
    (bad,) = [check for check in checks.values() if check["status"] == "bad"]
    assert name in bad["detail"]
    assert checks["dgemm"]["status"] == "ok" and len(checks) == 8


def test_doctor_without_a_gpu_says_so_instead_of_failing(capsys, disk):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    status, checks = doctor(capsys)
    assert checks["gpu"]["status"] == "info" and "none visible" in checks["gpu"]["value"]


# --- clear (local) -------------------------------------------------------------------------------
def test_clear_removes_every_entry_but_nothing_else(capsys, disk):
    for key in KEYS[:3]:
        disk.put_blob(key, make_entry_blob(key))
    foreign = disk.root / "notes.txt"
    foreign.write_text("mine")
    status, out, _ = run_cli(capsys, "clear")
    assert status == 0 and "removed 3 entries" in out
    assert list(disk.iter_entries()) == [] and foreign.read_text() == "mine"


def test_clear_skips_an_entry_whose_key_is_being_compiled(capsys, disk):
    for key in KEYS[:2]:
        disk.put_blob(key, make_entry_blob(key))
    with filelock.FileLock(str(disk.lock_path(KEYS[0]))):
        status, report = run_cli_json(capsys, "clear")
    assert status == 0 and report["removed"]["evicted"] == 1
    assert [key for key, _ in disk.iter_entries()] == [KEYS[0]]


def test_clear_dry_run_changes_nothing(capsys, disk):
    disk.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    status, out, _ = run_cli(capsys, "clear", "--dry-run")
    assert status == 0 and "would remove 1 entries" in out
    assert disk.get(KEYS[0]) is not None


def test_clear_refuses_a_directory_that_is_not_a_dgemm_cache(capsys, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    status, _, err = run_cli(capsys, "clear", "--cache-dir", home)
    assert status == 2 and "not a dgemm cache" in err
    assert (home / "thesis.tex").exists()
    status, _, err = run_cli(capsys, "clear", "--cache-dir", tmp_path / "typo")
    assert status == 2 and "does not exist" in err


# --- clear --remote -----------------------------------------------------------------------------
def fill_namespace(server, count: int) -> None:
    client = server.client()
    store = store_of(server)
    for key in KEYS[:count]:
        store.store(key, make_entry_blob(key))
    client.set("dgemm:fail:" + KEYS[5], b"compiler log")
    client.set("dgemm:lease:" + KEYS[4], b"token", px=60_000)      # a node compiling now
    client.set("dgemm:notes", b"someone else's")                     # not a name we write
    client.set("team:entry:" + KEYS[0], b"another namespace")


def test_clear_remote_without_yes_deletes_nothing_and_exits_2(capsys, disk, remote):
    fill_namespace(remote, 2)
    status, out, err = run_cli(capsys, "clear", "--remote")
    assert status == 2 and "--yes" in err and "would delete 2 entries" in out
    assert remote.client().exists("dgemm:entry:" + KEYS[0])
    status, report = run_cli_json(capsys, "clear", "--remote", "--dry-run")
    assert status == 0 and report["removed"]["entry"] == 2 and report["dry_run"]


def test_clear_remote_with_yes_deletes_the_namespaces_keys_only(capsys, disk, remote):
    fill_namespace(remote, 3)
    status, report = run_cli_json(capsys, "clear", "--remote", "--yes")
    assert status == 0 and report["removed"] == {"counters": 1, "entry": 3, "fail": 1,
                                                 "index": 1, "meta": 1}
    assert report["leases_kept"] == 1
    left = sorted(name.decode() for name in remote.client().keys("*"))
    assert left == ["dgemm:lease:" + KEYS[4], "dgemm:notes", "team:entry:" + KEYS[0]]


def test_clear_remote_works_through_many_scan_batches(capsys, disk, remote):
    client = remote.client()
    with client.pipeline(transaction=False) as pipe:
        for number in range(1234):
            pipe.set(f"dgemm:entry:{number:064x}", b"x")
        pipe.execute()
    store = store_of(remote)
    assert store.clear(dry_run=True, batch=100) == {"entry": 1234}
    assert store.clear(batch=100) == {"entry": 1234}
    assert client.dbsize() == 0


def test_clear_remote_on_a_dead_redis_exits_3(capsys, disk, remote):
    remote.kill()
    assert run_cli(capsys, "clear", "--remote", "--yes")[0] == cli.EXIT_NO_REMOTE


# --- gc --remote ---------------------------------------------------------------------------------
DAY_MS = 86_400_000


def stored_with_last_use(server, ages_days: dict) -> dict:
    """Store one entry per key and set its last use `ages_days[key]` days ago (None: no index
    member at all); {key: blob size}."""
    store, client, now = store_of(server), server.client(), time.time() * 1000
    sizes = {}
    for key, age in ages_days.items():
        blob = make_entry_blob(key, cubin=b"\x7fELF" + bytes(1000 * (1 + len(sizes))))
        store.store(key, blob)
        sizes[key] = len(blob)
        if age is None:
            client.zrem("dgemm:index", key)
        else:
            client.zadd("dgemm:index", {key: now - age * DAY_MS})
    return sizes


def test_gc_remote_evicts_the_least_recently_used_down_to_the_budget(capsys, disk, remote):
    sizes = stored_with_last_use(remote, {KEYS[0]: 3, KEYS[1]: 1, KEYS[2]: 2, KEYS[3]: 0})
    budget = sizes[KEYS[1]] + sizes[KEYS[3]]
    status, report = run_cli_json(capsys, "gc", "--remote", "--max-bytes", budget,
                              "--max-age", "none")
    assert status == 0
    assert sorted(action["key"] for action in report["actions"]) == sorted(KEYS[0:3:2])
    assert report["removed"] == {"expired": 0, "evicted": 2}
    assert (report["entries_before"], report["entries_after"]) == (4, 2)
    assert report["bytes_after"] == budget
    client = remote.client()
    for key in (KEYS[0], KEYS[2]):                      # blob, index and meta all gone
        assert not client.exists("dgemm:entry:" + key)
        assert client.zscore("dgemm:index", key) is None
        assert not client.hexists("dgemm:meta", key)
    assert client.exists("dgemm:entry:" + KEYS[1], "dgemm:entry:" + KEYS[3]) == 2
    assert int(client.hget("dgemm:counters", "evicted")) == 2


def test_gc_remote_expires_entries_unused_past_max_age_but_not_untracked_ones(capsys, disk,
                                                                            remote):
    stored_with_last_use(remote, {KEYS[0]: 40, KEYS[1]: 5, KEYS[2]: None})
    status, out, _ = run_cli(capsys, "gc", "--remote", "--max-age", "30d")
    assert status == 0 and "1 expired, 0 evicted" in out and "no last use       1" in out
    client = remote.client()
    assert not client.exists("dgemm:entry:" + KEYS[0])
    assert client.exists("dgemm:entry:" + KEYS[1], "dgemm:entry:" + KEYS[2]) == 2


def test_gc_remote_dry_run_reports_and_changes_nothing(capsys, disk, remote):
    stored_with_last_use(remote, {KEYS[0]: 40, KEYS[1]: 1})
    status, report = run_cli_json(capsys, "gc", "--remote", "--max-bytes", "0", "--dry-run")
    assert status == 0 and report["dry_run"] and report["removed"] == {"expired": 1,
                                                                       "evicted": 1}
    assert remote.client().exists("dgemm:entry:" + KEYS[0], "dgemm:entry:" + KEYS[1]) == 2


def test_remote_eviction_spares_an_entry_used_or_republished_since_it_was_listed(remote):
    store = store_of(remote)
    stored_with_last_use(remote, {KEYS[0]: 10, KEYS[1]: 10, KEYS[2]: None})
    listed = {item.key: item for item in store.scan_entries()}
    assert store.fetch(KEYS[0]) is not None                 # a node used it meanwhile
    store.store(KEYS[1], make_entry_blob(KEYS[1], cubin=b"\x7fELF-new"))     # republished
    store.fetch(KEYS[2])                                    # now it has a last use
    assert [store.evict(listed[key]) for key in KEYS[:3]] == [False, False, False]
    assert remote.client().exists(*("dgemm:entry:" + key for key in KEYS[:3])) == 3


def test_gc_remote_drops_index_and_meta_members_of_vanished_entries(capsys, disk, remote):
    stored_with_last_use(remote, {KEYS[0]: 1, KEYS[1]: 1})
    remote.client().delete("dgemm:entry:" + KEYS[0])                  # expired by its TTL
    status, report = run_cli_json(capsys, "gc", "--remote")
    assert status == 0 and report["stale_members_removed"] == 1
    assert not remote.client().hexists("dgemm:meta", KEYS[0])


def test_gc_remote_needs_a_remote_and_a_live_redis(capsys, disk, redis_server, monkeypatch):
    status, _, err = run_cli(capsys, "gc", "--remote")
    assert status == 3 and "DGEMM_REMOTE_CACHE" in err
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.5")
    redis_server.kill()
    assert run_cli(capsys, "gc", "--remote", redis_server.url)[0] == cli.EXIT_NO_REMOTE


def test_gc_remote_names_a_damaged_index_and_its_repair(capsys, disk, remote):
    stored_with_last_use(remote, {KEYS[0]: 1})
    remote.client().delete("dgemm:index")
    remote.client().set("dgemm:index", b"oops")
    status, _, err = run_cli(capsys, "gc", "--remote")
    assert status != 0 and "DEL dgemm:index" in err


# --- Redis Sentinel ----------------------------------------------------------------------------
class SentinelServer:
    """`redis-server sentinel.conf --sentinel` on a free loopback port, monitoring `primary`
    as "mymaster" with a quorum of 1."""

    def __init__(self, directory: Path, primary: RedisServer):
        self.directory, self.primary, self.port = Path(directory), primary, free_port()
        self.process = None

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/mymaster/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def start(self) -> "SentinelServer":
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "sentinel.conf"       # Sentinel rewrites it: a file of its own
        config.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {self.directory}\n"
                          f"sentinel monitor mymaster 127.0.0.1 {self.primary.port} 1\n"
                          f"sentinel down-after-milliseconds mymaster 60000\n")
        self.process = subprocess.Popen([REDIS_SERVER, str(config), "--sentinel"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_for_primary(self.primary.port)
        return self

    def wait_for_primary(self, port: int, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                address = self.client().sentinel_get_master_addr_by_name("mymaster")
                if address and int(address[1]) == port:
                    return
            except redis.RedisError:
                pass
            assert self.process.poll() is None, "the sentinel exited"
            assert time.monotonic() < deadline, f"the sentinel never named port {port}"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


class ReplicaServer(RedisServer):
    def __init__(self, directory: Path, primary: RedisServer):
        super().__init__(directory)
        self.primary = primary

    def _args(self) -> list:
        return super()._args() + ["--replicaof", "127.0.0.1", str(self.primary.port)]


@pytest.fixture
def sentinel(redis_server, tmp_path, monkeypatch):
    server = SentinelServer(tmp_path / "sentinel", redis_server).start()
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.5")
    yield server
    server.stop()


def test_the_walk_publishes_and_downloads_through_a_sentinel_url(sentinel, redis_server,
                                                                 test_kernels, spec, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", sentinel.url)
    first = dgemm.jit.ensure_compiled_outcome(spec)
    assert first.source == COMPILED
    assert redis_server.client().exists("dgemm:entry:" + first.key)     # on the primary
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "second-node"))
    dgemm.jit.state.reset()
    second = dgemm.jit.ensure_compiled_outcome(spec)
    assert (second.source, second.key) == (REMOTE, first.key)


def test_push_and_pull_through_a_sentinel_url(capsys, disk, sentinel, redis_server, tmp_path):
    disk.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    status, report = run_cli_json(capsys, "push", "--no-progress", "--remote", sentinel.url)
    assert status == 0 and report["copied"] == 1
    assert redis_server.client().exists("dgemm:entry:" + KEYS[0])
    other = tmp_path / "other-node"
    status, report = run_cli_json(capsys, "pull", "--arch", "sm_90a", "--any-compiler",
                              "--no-progress", "--cache-dir", other, "--remote", sentinel.url)
    assert status == 0 and report["copied"] == 1
    assert DiskTier(other).get(KEYS[0]) is not None
    status, checks = doctor(capsys, "--remote", sentinel.url)
    assert status == 0 and checks["remote"]["status"] == "ok"
    assert f"(primary 127.0.0.1:{redis_server.port})" in checks["remote"]["value"]


def test_after_a_failover_the_sentinel_url_reaches_the_new_primary(capsys, disk, redis_server,
                                                                  tmp_path, monkeypatch):
    # The replica first, so the sentinel knows it from its first look at the primary.
    replica = ReplicaServer(tmp_path / "replica", redis_server).start()
    sentinel = SentinelServer(tmp_path / "sentinel", redis_server).start()
    try:
        monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.5")
        monkeypatch.setenv("DGEMM_REMOTE_COOLDOWN", "0.2")
        disk.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
        assert run_cli(capsys, "push", "--no-progress", "--remote", sentinel.url)[0] == 0
        _fail_over(sentinel, replica)
        redis_server.kill()                 # the old primary is gone, as after a crash
        disk.put_blob(KEYS[1], make_entry_blob(KEYS[1]))
        # The first call may still use its connection to the old primary and open the
        # breaker; a call after the cool-down asks the sentinel and reaches the new primary.
        deadline = time.monotonic() + 20
        while run_cli(capsys, "push", "--no-progress", "--remote", sentinel.url)[0] != 0:
            assert time.monotonic() < deadline, "never reached the new primary"
            time.sleep(0.3)
        assert replica.client().exists("dgemm:entry:" + KEYS[0], "dgemm:entry:" + KEYS[1]) == 2
    finally:
        sentinel.stop()
        replica.stop()


def _fail_over(sentinel: SentinelServer, replica: RedisServer, timeout_s: float = 30) -> None:
    """SENTINEL FAILOVER once the sentinel can (NOGOODSLAVE before it knows the replica),
    until it names the replica as the primary."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sentinel.client().execute_command("SENTINEL", "FAILOVER", "mymaster")
            break
        except redis.ResponseError as error:
            assert time.monotonic() < deadline, f"the sentinel never failed over: {error}"
            time.sleep(0.1)
    sentinel.wait_for_primary(replica.port, timeout_s)


def test_a_dead_sentinel_fails_within_the_timeout_and_says_which_it_asked(capsys, disk,
                                                                        monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.5")
    dead = [free_port(), free_port()]
    url = f"redis+sentinel://127.0.0.1:{dead[0]},127.0.0.1:{dead[1]}/mymaster/0"
    disk.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    started = time.monotonic()
    status, _, err = run_cli(capsys, "push", "--no-progress", "--remote", url)
    assert status == cli.EXIT_NO_REMOTE and time.monotonic() - started < 10
    assert f"no sentinel of 127.0.0.1:{dead[0]}, 127.0.0.1:{dead[1]} named a primary" in err


def test_a_sentinel_that_does_not_monitor_the_service_is_a_clear_failure(capsys, disk,
                                                                       sentinel):
    url = sentinel.url.replace("/mymaster/", "/othermaster/")
    disk.put_blob(KEYS[0], make_entry_blob(KEYS[0]))
    status, _, err = run_cli(capsys, "push", "--no-progress", "--remote", url)
    assert status == cli.EXIT_NO_REMOTE and "'othermaster'" in err


def test_sentinel_urls_are_parsed_whole_and_redacted():
    parsed = parse_sentinel_url("redis+sentinel://app:s3cret@10.0.0.1,10.0.0.2:26380,"
                                "[::1]:26381/cache/2?sentinel_password=guard")
    assert parsed.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26380), ("::1", 26381))
    assert (parsed.service, parsed.db, parsed.username, parsed.password,
            parsed.sentinel_password) == ("cache", 2, "app", "s3cret", "guard")
    shown = redact("redis+sentinel://app:s3cret@h1/cache/2?sentinel_password=guard")
    assert "s3cret" not in shown and "guard" not in shown
    for bad, why in [("redis+sentinel://h1", "service name"),
                     ("redis+sentinel://h1/cache/x", "database number"),
                     ("redis+sentinel://h1/cache/0/1", "database number"),
                     ("redis+sentinel://h1,,h2/cache", "empty sentinel address"),
                     ("redis+sentinel://h1:99999/cache", "out of range"),
                     ("redis+sentinel://h1/cache?ssl=true", "unknown option")]:
        with pytest.raises(ValueError, match=why):
            check_url(bad)


def test_a_malformed_sentinel_url_in_the_environment_is_a_config_error(monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", "redis+sentinel://h1:26379/cache/zero")
    with pytest.raises(ConfigError, match="DGEMM_REMOTE_CACHE=.*database number"):
        dgemm.jit.env.Settings.from_env()
