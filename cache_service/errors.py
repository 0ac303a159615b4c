"""Exception tree of cache_service. Every class sits under `CacheServiceError`, so a caller can
catch "the shared cache failed" in one clause; none of them is a dgemm exception (this package
sits below dgemm and never imports it: dgemm's adapter turns them into its own errors).

    CacheServiceError
        RemoteUnavailable        the remote cannot be used now; build locally
            RemoteFull           Redis refused a write for lack of memory (reads still work)
            DamagedKey           a key of the cache holds what the cache never writes there
        UnexpectedReply          a reply Redis never sends (the server is probably not Redis)
        LeaseNotOwnedError       fenced out of a lease
        BuildFailed              another node's build failed recently
        NotPublished             the lease holder published nothing within the wait bound
"""
from __future__ import annotations


class CacheServiceError(Exception):
    """Root of every error cache_service raises on purpose."""


class RemoteUnavailable(CacheServiceError):
    """The remote cache cannot be used right now: the call failed (`cause` is the error) or
    the breaker is open and refused it without trying (`cause` is None). `opened_circuit` is
    True for the one failure that opened the breaker (and logged the outage), so that a
    caller can say once, not per call, what it does without the remote."""

    def __init__(self, message: str, cause: BaseException = None,
                 opened_circuit: bool = False):
        super().__init__(message)
        self.cause = cause
        self.opened_circuit = opened_circuit


class RemoteFull(RemoteUnavailable):
    """Redis refused a write because it is at `maxmemory` (OOM). Redis itself is fine, so the
    circuit breaker stays closed and downloads go on; what is built is not shared until
    Redis has room."""


class DamagedKey(RemoteUnavailable):
    """One of the cache's Redis keys holds another type (WRONGTYPE) or a value the cache never
    writes there, e.g. someone SET the meta hash's key to a string. The message names the key
    and how to repair it. Only operations on that key fail; the breaker stays closed."""


class UnexpectedReply(CacheServiceError):
    """The server answered with something Redis never sends for that request (a proxy or
    another service speaking Redis's protocol). Raised inside a remote operation, where the
    circuit breaker turns it into RemoteUnavailable like any other failure of the remote."""


class LeaseNotOwnedError(CacheServiceError):
    """The lease expired or another node took it over; the operation was not performed."""


class BuildFailed(CacheServiceError):
    """Another node's build of this key failed recently; its message and `log` are replayed
    here instead of building again (see `RemoteCache.single_flight`)."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NotPublished(CacheServiceError):
    """Another node holds the lease for a key and published nothing within the wait bound
    (`RemoteCache.single_flight(..., build_on_failure=False)` only; by default the waiter
    builds locally instead)."""
