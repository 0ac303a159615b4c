"""A cluster cache of verified blobs on Redis: a store with an index and metadata, single-flight
builds across nodes (a fenced lease and pub/sub notifications), and a circuit breaker that
keeps a sick Redis from stalling the application.

This is the bottom layer: it never imports dgemm (a CPU test parses the imports to keep it so).
What it needs from the application is injected into `remote_cache.RemoteCache`: a `verify`
callable, a `describe` callable for the meta hash, an `events` callback for counters, and a
`settings.RemoteSettings`. Errors derive from `errors.CacheServiceError`.

    errors.py          CacheServiceError, RemoteUnavailable (RemoteFull, DamagedKey),
                       UnexpectedReply, LeaseNotOwnedError, BuildFailed
    settings.py        RemoteSettings (timeouts, lease TTL, waits, entry and failure TTLs)
    client.py          a redis-py client from a URL (redis://, rediss://, unix://, or
                       redis+sentinel:// through Sentinel), every call bounded, every
                       connection checked to be Redis; `check_url(url)`, `redact(url)`
    replies.py         checks on replies (UnexpectedReply) and key types (DamagedKey)
    namespace.py       every Redis key name under one prefix
    lua.py             Lua scripts run by SHA
    store.py           EntryStore: fetch, store, discard, list (one round trip each; reads
                       never depend on writes); scan_entries, evict (fenced), clear for
                       housekeeping
    lease.py           Lease (SET PX when free, fenced renew/publish/fail/release), Renewer
    notifications.py   bounded waits on pub/sub channels
    breaker.py         CircuitBreaker
    remote_cache.py    RemoteCache: get/download/put and single_flight over all of the above

dgemm builds its RemoteCache in `dgemm.jit.remote`; the sync agent and bundles, which know
dgemm's entry format and disk tier, live in `dgemm.jobs`.
"""
