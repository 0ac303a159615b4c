"""What one call of the cache walk does: where the entry came from (the returned Outcome), how
often an entry is verified and the secret file read, and that threads asking for different
kernels never queue behind one another's compile. Compiles use the trivial test kernels."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

import dgemm.jit
from dgemm.heuristics import select
from dgemm.jit import compiler as compiler_module
from dgemm.jit import entry as entry_format
from dgemm.jit import remote, safe_files
from dgemm.jit.errors import MissingKernelError
from redis_server import redis_server  # noqa: F401


@pytest.fixture
def unpacks(monkeypatch) -> list:
    """Every entry verification (`entry.unpack`) made from now on, as the keys verified."""
    calls = []
    real = entry_format.unpack

    def counting(blob, expected_key, secret=None):
        calls.append(expected_key)
        return real(blob, expected_key, secret)

    monkeypatch.setattr(entry_format, "unpack", counting)
    return calls


@pytest.fixture
def secret_reads(tmp_path, monkeypatch) -> list:
    """DGEMM_CACHE_SECRET_FILE set; every read of that file from now on is recorded."""
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(b"team secret\n")
    monkeypatch.setenv("DGEMM_CACHE_SECRET_FILE", str(secret_file))
    reads = []
    real = safe_files.read_regular

    def recording(path, *args, **kwargs):
        if Path(path) == secret_file:
            reads.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(safe_files, "read_regular", recording)
    return reads


@pytest.fixture
def remote_cache(redis_server, monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "5")
    return redis_server


def _publish_remotely_from_another_node(spec, monkeypatch, fresh_dgemm_cache):
    """Compile `spec` on "another node" (its own cache dir) that publishes to Redis, then come
    back to this test's empty cache dir with nothing remembered."""
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(fresh_dgemm_cache.parent / "other-node"))
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "compiled"
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(fresh_dgemm_cache))
    dgemm.jit.state.reset()


# --- the outcome ----------------------------------------------------------------------------
def test_the_outcome_says_compiled_then_memory(test_kernels, spec):
    first = dgemm.jit.ensure_compiled_outcome(spec)
    second = dgemm.jit.ensure_compiled_outcome(spec)
    assert (first.source, second.source) == ("compiled", "memory")
    assert first.key == second.key
    assert first.compile_seconds > 0 and second.compile_seconds == 0.0
    assert second.entry is first.entry


def test_the_outcome_of_a_published_kernel_says_disk(warm_cache, spec):
    outcome = dgemm.jit.ensure_compiled_outcome(spec)
    assert (outcome.source, outcome.key, outcome.compile_seconds) == ("disk", warm_cache, 0.0)


def test_the_outcome_of_a_kernel_another_node_published_says_remote(
        test_kernels, spec, remote_cache, monkeypatch, fresh_dgemm_cache):
    _publish_remotely_from_another_node(spec, monkeypatch, fresh_dgemm_cache)
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "remote"


# --- verification once ----------------------------------------------------------------------
def test_a_disk_hit_is_verified_once(warm_cache, spec, unpacks):
    dgemm.jit.get_entry(spec)
    assert unpacks == [warm_cache]


def test_a_memory_hit_is_not_verified_again(warm_cache, spec, unpacks):
    dgemm.jit.ensure_compiled(spec)
    dgemm.jit.get_entry(spec)
    assert unpacks == [warm_cache]


def test_a_cold_compile_publishes_its_entry_without_verifying_it(test_kernels, spec, unpacks,
                                                                  fresh_dgemm_cache):
    key = dgemm.jit.ensure_compiled(spec)
    assert unpacks == []
    assert dgemm.jit.get_entry(spec).blob == (
        fresh_dgemm_cache / "v1" / key[:2] / f"{key}.kbin").read_bytes()


def test_a_cold_compile_published_to_redis_is_not_verified_either(test_kernels, spec, unpacks,
                                                                   remote_cache):
    key = dgemm.jit.ensure_compiled(spec)
    assert unpacks == [] and remote_cache.client().exists("dgemm:entry:" + key)


def test_a_remote_hit_is_verified_once(test_kernels, spec, remote_cache, monkeypatch,
                                       fresh_dgemm_cache, unpacks):
    _publish_remotely_from_another_node(spec, monkeypatch, fresh_dgemm_cache)
    unpacks.clear()
    outcome = dgemm.jit.ensure_compiled_outcome(spec)
    assert outcome.source == "remote" and unpacks == [outcome.key]
    assert dgemm.jit.stats()["remote_hits"] == 1


# --- settings read once ---------------------------------------------------------------------
def test_a_cold_compile_with_a_remote_tier_reads_the_secret_file_once(
        test_kernels, spec, remote_cache, secret_reads):
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "compiled"
    assert len(secret_reads) == 1


def test_a_remote_hit_reads_the_secret_file_once(test_kernels, spec, remote_cache, monkeypatch,
                                                 fresh_dgemm_cache, secret_reads):
    _publish_remotely_from_another_node(spec, monkeypatch, fresh_dgemm_cache)
    secret_reads.clear()
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "remote"
    assert len(secret_reads) == 1


def test_each_call_reads_the_secret_file_once(test_kernels, spec, secret_reads):
    dgemm.jit.ensure_compiled(spec)
    dgemm.jit.get_entry(spec)
    assert len(secret_reads) == 2


# --- threads ----------------------------------------------------------------------------------
def test_a_second_kernel_is_served_while_the_first_ones_compile_is_paused(test_kernels,
                                                                          monkeypatch):
    paused_spec = select("fp8_gemm_nt", 128, 4096, 7168)
    other_spec = select("fp8_gemm_nt", 128, 2048, 7168)
    assert paused_spec != other_spec
    entered, release = threading.Event(), threading.Event()
    real_compile = compiler_module.NvrtcCompiler.compile

    def compile_pausing_one_spec(self, spec, source):
        if spec == paused_spec:
            entered.set()
            assert release.wait(60), "the test never released the paused compile"
        return real_compile(self, spec, source)

    monkeypatch.setattr(compiler_module.NvrtcCompiler, "compile", compile_pausing_one_spec)
    outcomes = {}
    paused = threading.Thread(
        target=lambda: outcomes.update(paused=dgemm.jit.ensure_compiled_outcome(paused_spec)))
    paused.start()
    try:
        assert entered.wait(60), "the first compile never started"
        # The first thread is inside its compile (holding its key's file lock): the second
        # kernel is compiled and served meanwhile.
        served = dgemm.jit.ensure_compiled_outcome(other_spec)
        assert served.source == "compiled" and paused.is_alive() and "paused" not in outcomes
    finally:
        release.set()
        paused.join(60)
    assert outcomes["paused"].source == "compiled"
    assert dgemm.jit.stats()["compiles"] == 2


def test_a_thread_asking_for_a_key_being_compiled_waits_for_it_and_hits_disk(test_kernels,
                                                                            spec, monkeypatch):
    entered, release = threading.Event(), threading.Event()
    real_compile = compiler_module.NvrtcCompiler.compile

    def paused_compile(self, spec, source):
        entered.set()
        assert release.wait(60)
        return real_compile(self, spec, source)

    monkeypatch.setattr(compiler_module.NvrtcCompiler, "compile", paused_compile)
    outcomes = []
    threads = [threading.Thread(target=lambda: outcomes.append(
        dgemm.jit.ensure_compiled_outcome(spec).source)) for _ in range(2)]
    threads[0].start()
    assert entered.wait(60)
    threads[1].start()
    release.set()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) in (["compiled", "disk"], ["compiled", "memory"])
    assert dgemm.jit.stats()["compiles"] == 1


# --- the spec protocol --------------------------------------------------------------------------
class _MinimalSpec:
    """A spec with only the protocol's fields (no num_sms), as another kernel family might be."""
    FORMAT_VERSION = 1
    arch = "sm_90a"

    def to_json(self) -> str:
        return '{"arch":"sm_90a","kernel":"other"}'


def test_missing_kernel_error_reads_gemm_fields_only_when_the_spec_has_them():
    message = str(MissingKernelError(_MinimalSpec(), "ab" * 32))
    assert "--arch sm_90a" in message and "--num-sms" not in message
    with_sms = str(MissingKernelError(select("fp8_gemm_nt", 128, 4096, 7168), "ab" * 32))
    assert "--arch sm_90a and --num-sms 132" in with_sms


def test_the_remote_tier_is_one_object_per_settings(monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", "redis://127.0.0.1:1/0")    # never contacted
    first = remote.from_env()
    monkeypatch.setenv("DGEMM_REMOTE_TIMEOUT", "0.7")
    second = remote.from_env()
    assert second is not first and second.cache.settings.timeout_s == 0.7
