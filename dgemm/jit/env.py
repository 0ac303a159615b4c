"""Every DGEMM_* setting, read through one typed getter each, at call time; and `Settings`, an
immutable snapshot of the ones an operation of the cache walk needs.

Nothing is cached between operations: tests (and long-lived processes) may change the
environment. Within one operation (one `ensure_compiled`, one `dgemm-cache` command) the
snapshot is read once at its start, with the secret file read once, and handed down; nothing
below reads the environment again for those values. Callers read through the module
(`env.cache_dir()`, `env.Settings.from_env()`), never copy values at import. A bad value raises
`ConfigError` naming the variable, the value and the form that was expected. Commands call
`validate()` first, which reads every variable, so a typo fails before any work starts.
"""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from . import safe_files
from .errors import ConfigError

if TYPE_CHECKING:
    from cache_service.settings import RemoteSettings

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


# --- generic typed readers (public so other dgemm modules read their variables the same way) --
def get_str(name: str, default: Optional[str] = None) -> Optional[str]:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def get_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name}={value!r} is not a boolean; expected one of "
                      f"{', '.join(_TRUE)} or {', '.join(v for v in _FALSE if v)}")


def get_float(name: str, default: float, minimum: float = 0.0,
              maximum: float = 1e9) -> float:
    """A finite number in [minimum, maximum]; `default` when unset. `inf`, `nan` and values
    too large for the timeouts they feed (socket timeouts overflow) are refused."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not minimum <= number <= maximum:      # also rejects nan
        raise ConfigError(f"{name}={value!r} is not a number >= {_plain(minimum)} and <= "
                          f"{_plain(maximum)}; expected a finite number of that range, e.g. "
                          f"{name}={_plain(default)}")
    return number


def _plain(number: float) -> str:
    """1000000000 rather than 1e+09, in messages."""
    return f"{number:.0f}" if number == int(number) else f"{number:g}"


def get_int(name: str, default: int, minimum: int = 0) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer >= {minimum}; expected e.g. "
                          f"{name}={default}") from None
    if number < minimum:
        raise ConfigError(f"{name}={value!r} is below {minimum}; expected an integer >= {minimum}")
    return number


def get_choice(name: str, choices: tuple, default: str) -> str:
    value = get_str(name, default).strip().lower()
    if value not in choices:
        raise ConfigError(f"{name}={os.environ.get(name)!r} is not supported; expected one of "
                          f"{', '.join(choices)}")
    return value


# --- the local cache --------------------------------------------------------------------------
def cache_dir() -> Path:
    """DGEMM_CACHE_DIR: root of the local disk tier; when unset, DeepGEMM's DG_JIT_CACHE_DIR
    (so a program that sets it for DeepGEMM, as vLLM does, keeps its kernels there under
    `python -m dgemm.compat`); else ~/.cache/dgemm."""
    return Path(get_str("DGEMM_CACHE_DIR") or get_str("DG_JIT_CACHE_DIR")
                or "~/.cache/dgemm").expanduser()


def cache_dir_source() -> str:
    """The variable `cache_dir()` came from, or "default"."""
    for name in ("DGEMM_CACHE_DIR", "DG_JIT_CACHE_DIR"):
        if get_str(name) is not None:
            return name
    return "default"


def lock_timeout() -> float:
    """DGEMM_LOCK_TIMEOUT: seconds to wait for another process compiling the same key (600)."""
    return get_float("DGEMM_LOCK_TIMEOUT", 600.0)


def cache_secret() -> Optional[bytes]:
    """DGEMM_CACHE_SECRET, or the content of the file named by DGEMM_CACHE_SECRET_FILE: the
    HMAC key that signs entries. None when neither is set."""
    secret = get_str("DGEMM_CACHE_SECRET")
    secret_file = get_str("DGEMM_CACHE_SECRET_FILE")
    if secret is not None and secret_file is not None:
        raise ConfigError("DGEMM_CACHE_SECRET and DGEMM_CACHE_SECRET_FILE are both set; "
                          "expected at most one of them (unset the other)")
    if secret_file is not None:
        return _read_secret_file(secret_file)
    return None if secret is None else secret.encode()


_MAX_SECRET_FILE_BYTES = 64 << 10      # a secret is tens of bytes; a huge file is a mistake


def _read_secret_file(secret_file: str) -> bytes:
    """The secret in DGEMM_CACHE_SECRET_FILE: a regular file (symlinks followed, as secret
    mounts use them) of at most 64 KiB, opened without blocking, so a FIFO or a device named
    by mistake is refused instead of hanging or being read forever."""
    try:
        data = safe_files.read_regular(Path(secret_file).expanduser(), _MAX_SECRET_FILE_BYTES,
                                       follow_symlinks=True)
    except safe_files.UnsafeFileError as error:
        raise ConfigError(f"DGEMM_CACHE_SECRET_FILE={secret_file!r} cannot be used: {error}; "
                          f"expected a regular file of at most {_MAX_SECRET_FILE_BYTES} bytes "
                          f"holding the secret") from error
    except OSError as error:
        raise ConfigError(f"DGEMM_CACHE_SECRET_FILE={secret_file!r} cannot be read "
                          f"({error.strerror or error}); expected a readable file holding the "
                          f"secret") from error
    # Strip the trailing newline editors and `echo` add; it is never part of a key.
    data = data.strip()
    if not data:
        raise ConfigError(f"DGEMM_CACHE_SECRET_FILE={secret_file!r} is empty; expected a "
                          f"file holding the secret")
    return data


# --- the remote tier (cache_service reads no environment: dgemm hands it these) ---------------
def remote_cache() -> Optional[str]:
    """DGEMM_REMOTE_CACHE: redis://, rediss://, unix:// or redis+sentinel:// URL of the remote
    tier (cache_service.client lists the forms); None disables it. The URL is checked whole here
    (scheme, port, a numeric database, query options), so a typo is a ConfigError at the start
    instead of a silently different database."""
    url = get_str("DGEMM_REMOTE_CACHE")
    if url is None:
        return None
    from cache_service.client import EXPECTED_FORMS, check_url, redact
    try:
        check_url(url)
    except ValueError as error:
        raise ConfigError(f"DGEMM_REMOTE_CACHE={redact(url)!r} is not a usable Redis URL "
                          f"({error}); expected {EXPECTED_FORMS}") from None
    return url


def remote_namespace() -> str:
    """DGEMM_REMOTE_NAMESPACE: prefix of every Redis key (default "dgemm")."""
    namespace = get_str("DGEMM_REMOTE_NAMESPACE", "dgemm")
    if any(c.isspace() for c in namespace) or ":" in namespace:
        raise ConfigError(f"DGEMM_REMOTE_NAMESPACE={namespace!r} contains whitespace or ':'; "
                          f"expected a plain name such as 'dgemm' or 'team-a'")
    return namespace


# Upper bounds of the remote numbers: a day for every delay (Redis's socket timeout overflows
# far beyond that), ten years for an entry's TTL.
_DAY_S = 86400.0
_TEN_YEARS_S = 3650 * _DAY_S


def remote_settings() -> "RemoteSettings":
    """DGEMM_REMOTE_TIMEOUT (s, every Redis call), _COOLDOWN (s before the circuit breaker
    re-probes), _LEASE_TTL (s a dead builder's lease lasts; renewed every third of it),
    _WAIT (longest wait in s for another node's compile), _TTL (s an unused entry lives;
    0: forever), _FAIL_TTL (s a compile error is replayed to other nodes). Defaults are
    cache_service's; each is a finite number of seconds of at most a day (_TTL: ten years)."""
    from cache_service.settings import RemoteSettings as defaults
    return defaults(
        timeout_s=get_float("DGEMM_REMOTE_TIMEOUT", defaults.timeout_s, 0.001, _DAY_S),
        cooldown_s=get_float("DGEMM_REMOTE_COOLDOWN", defaults.cooldown_s, 0.0, _DAY_S),
        lease_ttl_s=get_float("DGEMM_REMOTE_LEASE_TTL", defaults.lease_ttl_s, 0.1, _DAY_S),
        max_wait_s=get_float("DGEMM_REMOTE_WAIT", defaults.max_wait_s, 0.0, _DAY_S),
        entry_ttl_s=get_float("DGEMM_REMOTE_TTL", defaults.entry_ttl_s, 0.0, _TEN_YEARS_S),
        failure_ttl_s=get_float("DGEMM_REMOTE_FAIL_TTL", defaults.failure_ttl_s, 0.001, _DAY_S),
    )


# --- compilation -------------------------------------------------------------------------------
def jit_compiler() -> str:
    """DGEMM_JIT_COMPILER: "nvrtc" (default) or "nvcc"."""
    return get_choice("DGEMM_JIT_COMPILER", ("nvrtc", "nvcc"), "nvrtc")


def nvcc_path() -> Optional[str]:
    """DGEMM_NVCC: the nvcc executable to use (else $CUDA_HOME/bin/nvcc, else nvcc on PATH)."""
    return get_str("DGEMM_NVCC")


def cuda_home() -> Optional[Path]:
    """CUDA_HOME (or CUDA_PATH): the CUDA toolkit root, if one is configured."""
    value = get_str("CUDA_HOME") or get_str("CUDA_PATH")
    return None if value is None else Path(value).expanduser()


def disable_jit() -> bool:
    """DGEMM_DISABLE_JIT: fail closed; only kernels already in a cache tier may run."""
    return get_bool("DGEMM_DISABLE_JIT")


def jit_debug() -> bool:
    """DGEMM_JIT_DEBUG: compile with line info (part of the key) and log every tier step."""
    return get_bool("DGEMM_JIT_DEBUG")


def csrc_dir_override() -> Optional[Path]:
    """DGEMM_CSRC_DIR: compile kernels from this csrc/ tree instead of the packaged one (kernel
    development and tests). Only the content of the tree enters the key, never its path."""
    value = get_str("DGEMM_CSRC_DIR")
    return None if value is None else Path(value).expanduser()


# --- the launch path ------------------------------------------------------------------------
# The launch path reads a few variables on every call. os.environ.get costs ~0.5 us a variable
# (it encodes the key each time); on POSIX CPython keeps the environment in a dict of bytes that
# os.environ and monkeypatch.setenv update, which reads in ~50 ns.
_ENVIRON_BYTES = (os.environ._data if os.name == "posix"
                  and isinstance(getattr(os.environ, "_data", None), dict) else None)


def launch_value(name: str):
    """The raw value of `name` (bytes on POSIX, str elsewhere), or None when unset; only for
    comparisons on the launch path. Parse through the typed getters above."""
    if _ENVIRON_BYTES is not None:
        return _ENVIRON_BYTES.get(name.encode())
    return os.environ.get(name)


_COMPILER, _CSRC, _DEBUG = (n.encode() if _ENVIRON_BYTES is not None else n
                            for n in ("DGEMM_JIT_COMPILER", "DGEMM_CSRC_DIR", "DGEMM_JIT_DEBUG"))


_FORCE, _TUNE = (n.encode() if _ENVIRON_BYTES is not None else n
                 for n in ("DGEMM_FORCE_PORTABLE", "DGEMM_AUTOTUNE"))
LAUNCH_KEYS = (_FORCE, _TUNE, _COMPILER, _CSRC, _DEBUG)     # launch_settings' order


def launch_environ():
    """The dict `launch_settings` reads (POSIX: the environment's dict of bytes, which
    os.environ updates), or None where there is none (then only `launch_settings` reads it)."""
    return _ENVIRON_BYTES


# Bound once (~50 ns a call less than looking it up): the environment's dict (os.environ
# where there is none) is the same object for the life of the process.
_launch_get = (_ENVIRON_BYTES if _ENVIRON_BYTES is not None else os.environ).get


def launch_settings() -> tuple:
    """The raw values of every variable that can change which kernel a call runs or how it is
    selected (the family, autotuning, the build fingerprint): the launch path's memo of
    validated calls keys on them, read in one go."""
    get = _launch_get
    return get(_FORCE), get(_TUNE), get(_COMPILER), get(_CSRC), get(_DEBUG)


def build_fingerprint() -> tuple:
    """The raw settings that decide which cubin a spec maps to (the compiler, the csrc tree,
    debug info): cheap enough for the launch path, which keys loaded kernels on it so that a
    kernel loaded under one DGEMM_JIT_COMPILER is not served after it changes. (The nvcc
    executable and CUDA_HOME are taken as fixed for the life of a process.)"""
    get = (_ENVIRON_BYTES if _ENVIRON_BYTES is not None else os.environ).get
    return (get(_COMPILER), get(_CSRC), get(_DEBUG))


# --- autotuning (dgemm.autotune) ---------------------------------------------------------------
def autotune() -> bool:
    """DGEMM_AUTOTUNE: time the cost model's best few kernels the first time a shape class is
    seen and share the fastest as a decision (default off: the heuristic alone)."""
    return get_bool("DGEMM_AUTOTUNE")


def autotune_top_k() -> int:
    """DGEMM_AUTOTUNE_TOP_K: how many of the cost model's best kernels are timed (4; 2..16), plus
    a K-split pair for a dense GEMM with long K and few tiles (hopper_fp8.k_split_candidate)."""
    value = get_int("DGEMM_AUTOTUNE_TOP_K", 4, minimum=2)
    if value > 16:
        raise ConfigError(f"DGEMM_AUTOTUNE_TOP_K={value} is above 16; expected an integer "
                          f"from 2 to 16 (each candidate costs a compile and a timing)")
    return value


def autotune_wait() -> float:
    """DGEMM_AUTOTUNE_WAIT: longest wait in s for another process's timing of a shape class
    (300); past it the waiter uses the heuristic's kernel."""
    return get_float("DGEMM_AUTOTUNE_WAIT", 300.0, 0.0, _DAY_S)


_AUTOTUNE = "DGEMM_AUTOTUNE".encode() if _ENVIRON_BYTES is not None else "DGEMM_AUTOTUNE"
_autotune_values: dict = {}      # raw value -> parsed bool (a handful of distinct values)


def autotune_on_launch() -> bool:
    """DGEMM_AUTOTUNE for the launch path: one dict lookup when unset, the typed getter's
    parse (and its ConfigError) for a value not seen before."""
    raw = (_ENVIRON_BYTES if _ENVIRON_BYTES is not None else os.environ).get(_AUTOTUNE)
    if raw is None:
        return False
    found = _autotune_values.get(raw)
    if found is None:
        found = autotune()
        if len(_autotune_values) < 64:
            _autotune_values[raw] = found
    return found


# --- one snapshot per operation ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RemoteConfig:
    """Where the remote tier lives and its numbers (DGEMM_REMOTE_*)."""
    url: str
    namespace: str
    settings: "RemoteSettings"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What one operation of the cache walk needs, read once at its start. Hashable, so that
    objects built from it (disk tier, remote tier, compiler) can be memoised on its fields."""
    cache_dir: Path
    secret: Optional[bytes]          # HMAC key; the secret file is read once, here
    lock_timeout: float
    compiler: str                    # "nvrtc" | "nvcc"
    debug: bool
    disable_jit: bool
    remote: Optional[RemoteConfig]   # None: DGEMM_REMOTE_CACHE is unset

    @classmethod
    def from_env(cls) -> "Settings":
        """The snapshot of the environment now; ConfigError for a malformed variable."""
        url = remote_cache()
        remote = None if url is None else RemoteConfig(url, remote_namespace(), remote_settings())
        return cls(cache_dir=cache_dir(), secret=cache_secret(), lock_timeout=lock_timeout(),
                   compiler=jit_compiler(), debug=jit_debug(), disable_jit=disable_jit(),
                   remote=remote)


# --- every variable at once, before a command does any work ------------------------------------
# Every DGEMM_* variable dgemm reads (the README's Configuration table, plus the test hooks).
KNOWN_VARIABLES = (
    "DGEMM_CACHE_DIR", "DGEMM_CACHE_SECRET", "DGEMM_CACHE_SECRET_FILE", "DGEMM_LOCK_TIMEOUT",
    "DGEMM_JIT_COMPILER", "DGEMM_JIT_DEBUG", "DGEMM_NVCC", "DGEMM_CSRC_DIR", "DGEMM_DISABLE_JIT",
    "DGEMM_FORCE_PORTABLE", "DGEMM_AUTOTUNE", "DGEMM_AUTOTUNE_TOP_K", "DGEMM_AUTOTUNE_WAIT",
    "DGEMM_NATIVE", "DGEMM_NATIVE_DIR", "DGEMM_REMOTE_CACHE", "DGEMM_REMOTE_NAMESPACE",
    "DGEMM_REMOTE_TIMEOUT", "DGEMM_REMOTE_COOLDOWN", "DGEMM_REMOTE_LEASE_TTL",
    "DGEMM_REMOTE_WAIT", "DGEMM_REMOTE_TTL", "DGEMM_REMOTE_FAIL_TTL",
    "DGEMM_TEST_PAUSE", "DGEMM_TEST_PAUSE_MARKER",
    "DGEMM_PREWARM_NUM_SMS",        # read by the Docker image's dgemm-prewarm, not by dgemm
    "DGEMM_COMPAT_ROOT",            # set by `python -m dgemm.compat` for its child processes
)


def validate() -> Settings:
    """Read every DGEMM_* variable now and return the walk's settings, so that a command fails
    at its start (ConfigError naming the variable and the fix) rather than in the middle of
    its work, or once per kernel. Variables the walk reads only in some cases (the remote
    numbers without DGEMM_REMOTE_CACHE, DGEMM_FORCE_PORTABLE, the test hook) are read too.
    A set DGEMM_* variable dgemm does not know is no error; `unknown_variables()` lists them
    for a warning."""
    settings = Settings.from_env()
    remote_namespace()
    remote_settings()
    get_bool("DGEMM_FORCE_PORTABLE")
    get_bool("DGEMM_NATIVE", True)
    autotune(), autotune_top_k(), autotune_wait()
    _test_pause()
    override = csrc_dir_override()
    if override is not None and not (override / "dgemm").is_dir():
        raise ConfigError(f"DGEMM_CSRC_DIR={str(override)!r} has no dgemm/ directory; expected "
                          f"a copy of dgemm's csrc/ tree (or unset it to use the packaged one)")
    return settings


def unknown_variables() -> list:
    """Set DGEMM_* variables that dgemm never reads: most likely a typo of a known one."""
    return sorted(name for name in os.environ
                  if name.startswith("DGEMM_") and name not in KNOWN_VARIABLES)


# --- test hooks ---------------------------------------------------------------------------------
def _test_pause() -> Optional[tuple]:
    """DGEMM_TEST_PAUSE as (stage, seconds), or None when unset."""
    setting = get_str("DGEMM_TEST_PAUSE")
    if setting is None:
        return None
    wanted, _, seconds = setting.partition(":")
    try:
        return wanted, float(seconds)
    except ValueError:
        raise ConfigError(f"DGEMM_TEST_PAUSE={setting!r}; expected <stage>:<seconds>, e.g. "
                          f"compile:30") from None


def pause_for_tests(stage: str) -> None:
    """Test hook: with DGEMM_TEST_PAUSE="<stage>:<seconds>" the named stage ("compile" while
    holding the compile lock, "publish" after the temp file is written and before it is
    renamed) sleeps, after writing this process's pid to DGEMM_TEST_PAUSE_MARKER if set, so a
    test can SIGKILL the process at exactly that point. Does nothing when unset."""
    pause = _test_pause()
    if pause is None or pause[0] != stage:
        return
    delay = pause[1]
    marker = get_str("DGEMM_TEST_PAUSE_MARKER")
    if marker is not None:
        Path(marker).write_text(str(os.getpid()))
    time.sleep(delay)
