"""dgemm's cluster kernel cache on Redis: the remote tier, single-flight compiles across nodes,
the circuit breaker that keeps a sick Redis from stalling training, the sync agent and bundles.

`dgemm.jit.cache` finds it through `cache_service.remote_tier.from_env()`; nothing here runs
unless DGEMM_REMOTE_CACHE is set (or a `dgemm-cache` subcommand asks for it).
"""
