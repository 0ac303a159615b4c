"""Exception tree of the JIT layer. Every class sits under `DgemmError`, so callers can catch
"dgemm failed" in one clause and still tell a compile failure from a cache-directory problem."""
from __future__ import annotations


class DgemmError(Exception):
    """Root of every error dgemm raises on purpose."""


class CompileError(DgemmError, RuntimeError):
    """NVRTC or NVCC could not turn a kernel spec into a cubin. `.log` holds the full compiler
    output, `.spec` the spec that failed (when known)."""

    def __init__(self, message: str, log: str = "", spec=None):
        super().__init__(message)
        self.log = log
        self.spec = spec


class MissingKernelError(DgemmError, RuntimeError):
    """DGEMM_DISABLE_JIT is set and no cache tier holds the kernel: fail closed instead of
    compiling. Carries `.spec` and `.key`."""

    def __init__(self, spec, key: str):
        self.spec = spec
        self.key = key
        # The JIT knows only the spec protocol (to_json, arch); other fields are named when the
        # spec has them, so the advice stays exact for GEMM specs without assuming them.
        targets = f"--arch {spec.arch}"
        num_sms = getattr(spec, "num_sms", None)
        if num_sms is not None:
            targets += f" and --num-sms {num_sms}"
        super().__init__(
            f"no cached kernel for spec {spec.to_json()} (key {key}) and DGEMM_DISABLE_JIT is "
            f"set, so dgemm may not compile it. Compile it ahead of time on any host (no GPU "
            f"needed) with `dgemm-cache prewarm` for your shapes, using the same compiler, "
            f"{targets}, then point DGEMM_CACHE_DIR or DGEMM_REMOTE_CACHE at that cache; or "
            f"unset DGEMM_DISABLE_JIT to compile on demand.")


class CacheDirError(DgemmError, RuntimeError):
    """The local cache directory cannot be created or written."""


class CompileLockTimeout(DgemmError, TimeoutError):
    """Waited longer than DGEMM_LOCK_TIMEOUT for another process's compile of the same key."""


class EntryError(DgemmError):
    """A cache entry blob is malformed, corrupt, badly signed or for another key. Internal:
    tiers turn it into a miss."""


class ConfigError(DgemmError, ValueError):
    """A DGEMM_* environment variable holds a value of the wrong form."""


class KernelNotWarmError(DgemmError, RuntimeError):
    """A call would have to compile or load a kernel while its stream is capturing a CUDA
    graph, which would break the capture; the message names the call and the warm-up to run
    before capturing."""
