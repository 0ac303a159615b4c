"""dgemm.jit.env: typed getters with defaults and errors that name variable, value and form."""
from pathlib import Path

import pytest

from dgemm.jit import env
from dgemm.jit.errors import ConfigError


def test_cache_dir_defaults_to_the_user_cache(monkeypatch):
    monkeypatch.delenv("DGEMM_CACHE_DIR")
    assert env.cache_dir() == Path("~/.cache/dgemm").expanduser()


def test_cache_dir_expands_a_tilde(monkeypatch):
    monkeypatch.setenv("DGEMM_CACHE_DIR", "~/elsewhere")
    assert env.cache_dir() == Path.home() / "elsewhere"


def test_compiler_defaults_to_nvrtc():
    assert env.jit_compiler() == "nvrtc"


def test_unknown_compiler_names_variable_value_and_choices(monkeypatch):
    monkeypatch.setenv("DGEMM_JIT_COMPILER", "clang")
    with pytest.raises(ConfigError, match=r"DGEMM_JIT_COMPILER='clang'.*nvrtc, nvcc"):
        env.jit_compiler()


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_boolean_variables_accept_the_usual_true_spellings(monkeypatch, value):
    monkeypatch.setenv("DGEMM_DISABLE_JIT", value)
    assert env.disable_jit() is True


def test_a_non_boolean_value_is_rejected_with_the_expected_form(monkeypatch):
    monkeypatch.setenv("DGEMM_JIT_DEBUG", "maybe")
    with pytest.raises(ConfigError, match=r"DGEMM_JIT_DEBUG='maybe' is not a boolean"):
        env.jit_debug()


def test_a_negative_lock_timeout_is_rejected(monkeypatch):
    monkeypatch.setenv("DGEMM_LOCK_TIMEOUT", "-3")
    with pytest.raises(ConfigError, match=r"DGEMM_LOCK_TIMEOUT='-3' is not a number >= 0"):
        env.lock_timeout()


def test_the_secret_can_come_from_a_file_without_its_newline(monkeypatch, tmp_path):
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret\n")
    monkeypatch.setenv("DGEMM_CACHE_SECRET_FILE", str(secret_file))
    assert env.cache_secret() == b"s3cret"


def test_setting_both_secret_variables_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DGEMM_CACHE_SECRET", "a")
    monkeypatch.setenv("DGEMM_CACHE_SECRET_FILE", str(tmp_path / "b"))
    with pytest.raises(ConfigError, match="both set"):
        env.cache_secret()


def test_an_unreadable_secret_file_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("DGEMM_CACHE_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="DGEMM_CACHE_SECRET_FILE=.*cannot be read"):
        env.cache_secret()


def test_a_remote_cache_that_is_not_a_redis_url_is_rejected(monkeypatch):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", "localhost:6379")
    with pytest.raises(ConfigError, match=r"DGEMM_REMOTE_CACHE='localhost:6379'.*redis://"):
        env.remote_cache()


def test_remote_namespace_defaults_to_dgemm():
    assert env.remote_namespace() == "dgemm"


def test_the_test_pause_hook_writes_its_marker_and_sleeps_only_for_its_stage(monkeypatch,
                                                                             tmp_path):
    marker = tmp_path / "marker"
    monkeypatch.setenv("DGEMM_TEST_PAUSE", "publish:0")
    monkeypatch.setenv("DGEMM_TEST_PAUSE_MARKER", str(marker))
    env.pause_for_tests("compile")
    assert not marker.exists()
    env.pause_for_tests("publish")
    assert marker.exists()
