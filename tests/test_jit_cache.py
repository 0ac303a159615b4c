"""dgemm.jit.cache: the tier walk, one compile per key per node, crash safety, fail-closed mode."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import dgemm.jit
from dgemm.jit import entry as entry_format
from dgemm.jit import remote
from dgemm.jit.errors import MissingKernelError
from dgemm.jit.tiers import DiskTier

ENSURE_CODE = ("from dgemm.heuristics import select\n"
               "import dgemm.jit\n"
               "dgemm.jit.ensure_compiled(select('fp8_gemm_nt', 128, 4096, 7168))\n"
               "print(json.dumps(dgemm.jit.stats()))\n")


def _entries(cache_dir):
    return list(DiskTier(cache_dir).iter_entries())


# --- the walk and its counters ------------------------------------------------------------------
def test_a_cold_cache_compiles_once_and_publishes_to_disk(test_kernels, spec, fresh_dgemm_cache):
    key = dgemm.jit.ensure_compiled(spec)
    assert dgemm.jit.stats()["compiles"] == 1
    assert [k for k, _ in _entries(fresh_dgemm_cache)] == [key]


def test_compile_seconds_are_counted(test_kernels, spec):
    dgemm.jit.ensure_compiled(spec)
    assert dgemm.jit.stats()["compile_seconds"] > 0


def test_a_second_request_is_a_memory_hit(test_kernels, spec):
    dgemm.jit.ensure_compiled(spec)
    dgemm.jit.ensure_compiled(spec)
    assert (dgemm.jit.stats()["compiles"], dgemm.jit.stats()["memory_hits"]) == (1, 1)


def test_a_published_kernel_is_a_disk_hit_in_a_new_process(warm_cache, spec):
    assert dgemm.jit.ensure_compiled(spec) == warm_cache
    assert (dgemm.jit.stats()["disk_hits"], dgemm.jit.stats()["compiles"]) == (1, 0)


def test_reset_stats_zeroes_every_counter(warm_cache, spec):
    dgemm.jit.ensure_compiled(spec)
    dgemm.jit.reset_stats()
    assert set(dgemm.jit.stats().values()) == {0}


def test_stats_has_exactly_the_documented_counters():
    assert set(dgemm.jit.stats()) == {"memory_hits", "disk_hits", "remote_hits", "compiles",
                                      "compile_seconds", "waits", "remote_errors",
                                      "decision_memory_hits", "decision_disk_hits",
                                      "decision_remote_hits", "decision_waits",
                                      "decisions_refused", "autotune_timings",
                                      "autotune_fallbacks"}


def test_get_entry_returns_the_cubin_and_its_symbol(test_kernels, spec):
    entry = dgemm.jit.get_entry(spec)
    assert entry.cubin.startswith(b"\x7fELF") and "fp8_gemm_kernel" in entry.symbol
    assert entry.spec == spec.to_json() and entry.compiler.startswith("nvrtc ")


def test_a_secret_makes_published_entries_signed(test_kernels, spec, monkeypatch,
                                                 fresh_dgemm_cache):
    monkeypatch.setenv("DGEMM_CACHE_SECRET", "team secret")
    key = dgemm.jit.ensure_compiled(spec)
    blob = DiskTier(fresh_dgemm_cache).entry_path(key).read_bytes()
    assert entry_format.unpack(blob, key, b"team secret").key == key


def test_nvcc_is_used_when_asked_for(test_kernels, spec, monkeypatch):
    monkeypatch.setenv("DGEMM_JIT_COMPILER", "nvcc")
    assert dgemm.jit.get_entry(spec).compiler.startswith("nvcc ")


# --- damaged entries ------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "bit-flipped"])
def test_a_damaged_disk_entry_is_recompiled(warm_cache, spec, fresh_dgemm_cache, damage):
    path = DiskTier(fresh_dgemm_cache).entry_path(warm_cache)
    blob = bytearray(path.read_bytes())
    if damage == "truncated":
        blob = blob[:-100]
    else:
        blob[200] ^= 0x10
    path.write_bytes(bytes(blob))
    dgemm.jit.ensure_compiled(spec)
    assert dgemm.jit.stats()["compiles"] == 1
    assert DiskTier(fresh_dgemm_cache).get(warm_cache) is not None


# --- fail closed ----------------------------------------------------------------------------------
def test_disable_jit_raises_missing_kernel_error_naming_spec_key_and_prewarm(test_kernels, spec,
                                                                            monkeypatch):
    monkeypatch.setenv("DGEMM_DISABLE_JIT", "1")
    with pytest.raises(MissingKernelError) as raised:
        dgemm.jit.ensure_compiled(spec)
    message = str(raised.value)
    assert raised.value.key in message and spec.to_json() in message
    assert "dgemm-cache prewarm" in message and raised.value.spec == spec
    assert dgemm.jit.stats()["compiles"] == 0


def test_disable_jit_still_serves_cached_kernels(warm_cache, spec, monkeypatch):
    monkeypatch.setenv("DGEMM_DISABLE_JIT", "1")
    assert dgemm.jit.ensure_compiled(spec) == warm_cache


def test_an_unwritable_cache_dir_is_warned_about_and_the_kernel_served_from_memory(
        test_kernels, spec, monkeypatch, tmp_path, caplog):
    blocker = tmp_path / "regular-file"
    blocker.write_text("")
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(blocker / "cache"))
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "compiled"
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "memory"
    assert re.search(r"cannot write the disk cache .*regular-file/cache cannot be created.*"
                     r"Set DGEMM_CACHE_DIR", caplog.text)


def test_a_new_secret_gets_its_own_remote_tier(monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", "redis://127.0.0.1:1/0")    # never contacted
    monkeypatch.setenv("DGEMM_CACHE_SECRET", "first")
    first = remote.from_env()
    assert remote.from_env() is first
    monkeypatch.setenv("DGEMM_CACHE_SECRET", "second")
    assert remote.from_env() is not first


def test_state_reset_forgets_the_remote_tier_and_its_breaker(monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", "redis://127.0.0.1:1/0")
    first = remote.from_env()
    dgemm.jit.state.reset()
    assert remote.from_env() is not first


def test_state_reset_forgets_the_memory_tier_and_the_counters(warm_cache, spec):
    dgemm.jit.ensure_compiled(spec)
    dgemm.jit.state.reset()
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "disk"
    assert dgemm.jit.stats()["disk_hits"] == 1


def test_reset_stats_keeps_the_memory_tier(warm_cache, spec):
    dgemm.jit.ensure_compiled(spec)
    dgemm.jit.reset_stats()
    assert dgemm.jit.ensure_compiled_outcome(spec).source == "memory"


def test_importing_dgemm_jit_leaves_the_gpu_runtime_unloaded(python_subprocess):
    result = python_subprocess("import sys, dgemm.jit\n"
                               "print(json.dumps('dgemm.jit.runtime' in sys.modules))\n")
    assert json.loads(result.stdout) is False


def test_importing_dgemm_and_its_kernel_families_leaves_the_gpu_runtime_unloaded(
        python_subprocess):
    result = python_subprocess("import sys, dgemm, dgemm.heuristics, dgemm.kernels.loader\n"
                               "print(json.dumps('dgemm.jit.runtime' in sys.modules))\n")
    assert json.loads(result.stdout) is False


# --- many processes, one compile ------------------------------------------------------------------
def test_eight_processes_on_one_cache_dir_compile_exactly_once(test_kernels):
    environment = dict(os.environ, PYTHONPATH=os.getcwd(), DGEMM_TEST_PAUSE="compile:1")
    children = [subprocess.Popen([sys.executable, "-c", "import json\n" + ENSURE_CODE],
                                 env=environment, stdout=subprocess.PIPE, text=True)
                for _ in range(8)]
    totals = {}
    for child in children:
        output, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        for name, value in json.loads(output).items():
            totals[name] = totals.get(name, 0) + value
    assert totals["compiles"] == 1
    assert totals["compiles"] + totals["disk_hits"] == 8


# --- crashes --------------------------------------------------------------------------------------
def _kill_during(stage, marker, cache_dir):
    environment = dict(os.environ, PYTHONPATH=os.getcwd(), DGEMM_TEST_PAUSE=f"{stage}:60",
                       DGEMM_TEST_PAUSE_MARKER=str(marker))
    child = subprocess.Popen([sys.executable, "-c", "import json\n" + ENSURE_CODE],
                             env=environment, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert child.poll() is None, f"child exited ({child.returncode}) before reaching {stage}"
        assert time.monotonic() < deadline, f"child never reached the {stage} pause"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    return child


@pytest.mark.parametrize("stage", ["compile", "publish"])
def test_a_process_killed_mid_build_leaves_no_visible_entry(test_kernels, fresh_dgemm_cache,
                                                            tmp_path, stage):
    _kill_during(stage, tmp_path / "marker", fresh_dgemm_cache)
    assert _entries(fresh_dgemm_cache) == []


def test_a_process_killed_while_publishing_had_written_only_a_temp_file(test_kernels,
                                                                        fresh_dgemm_cache,
                                                                        tmp_path):
    _kill_during("publish", tmp_path / "marker", fresh_dgemm_cache)
    assert [p.suffix for p in (fresh_dgemm_cache / "tmp").iterdir()] == [".tmp"]


@pytest.mark.parametrize("stage", ["compile", "publish"])
def test_the_next_process_after_a_kill_builds_the_kernel(test_kernels, spec, fresh_dgemm_cache,
                                                         tmp_path, monkeypatch, stage):
    _kill_during(stage, tmp_path / "marker", fresh_dgemm_cache)
    monkeypatch.setenv("DGEMM_LOCK_TIMEOUT", "10")    # the dead holder's lock must be free
    key = dgemm.jit.ensure_compiled(spec)
    assert dgemm.jit.stats()["compiles"] == 1
    assert [k for k, _ in _entries(fresh_dgemm_cache)] == [key]
