"""The remote tier's DGEMM_* variables, read at call time through dgemm.jit.env's typed
readers (a bad value raises ConfigError naming the variable, the value and the expected form).
The URL, namespace and secret themselves are read by dgemm.jit.env."""
from __future__ import annotations

import dataclasses

from dgemm.jit import env


@dataclasses.dataclass(frozen=True)
class RemoteSettings:
    timeout_s: float = 2.0          # DGEMM_REMOTE_TIMEOUT: bound on every Redis call
    cooldown_s: float = 30.0        # DGEMM_REMOTE_COOLDOWN: circuit breaker re-probe delay
    lease_ttl_s: float = 30.0       # DGEMM_REMOTE_LEASE_TTL: a dead compiler's lease lasts this
    max_wait_s: float = 300.0       # DGEMM_REMOTE_WAIT: longest wait for another node's compile
    entry_ttl_s: float = 0.0        # DGEMM_REMOTE_TTL: entries expire unless hit (0: never)
    failure_ttl_s: float = 30.0     # DGEMM_REMOTE_FAIL_TTL: a compile error is replayed this long

    @classmethod
    def from_env(cls) -> "RemoteSettings":
        return cls(
            timeout_s=env.get_float("DGEMM_REMOTE_TIMEOUT", cls.timeout_s, minimum=0.001),
            cooldown_s=env.get_float("DGEMM_REMOTE_COOLDOWN", cls.cooldown_s),
            lease_ttl_s=env.get_float("DGEMM_REMOTE_LEASE_TTL", cls.lease_ttl_s, minimum=0.1),
            max_wait_s=env.get_float("DGEMM_REMOTE_WAIT", cls.max_wait_s),
            entry_ttl_s=env.get_float("DGEMM_REMOTE_TTL", cls.entry_ttl_s),
            failure_ttl_s=env.get_float("DGEMM_REMOTE_FAIL_TTL", cls.failure_ttl_s,
                                        minimum=0.001),
        )
