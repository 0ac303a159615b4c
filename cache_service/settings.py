"""The remote cache's numbers, as a plain frozen dataclass passed to `RemoteCache`.

Nothing here reads the environment: the application that embeds cache_service decides where
settings come from (dgemm reads them from DGEMM_REMOTE_* in `dgemm.jit.env.remote_settings`).
The defaults below are the single place each default is written.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class RemoteSettings:
    timeout_s: float = 2.0          # bound on every Redis call
    cooldown_s: float = 30.0        # circuit breaker re-probe delay
    lease_ttl_s: float = 10.0       # a dead builder's lease lasts this long (renewed every third)
    max_wait_s: float = 300.0       # longest wait for another node's build
    entry_ttl_s: float = 0.0        # entries expire unless hit (0: never)
    failure_ttl_s: float = 30.0     # a build failure is replayed to other nodes this long
