"""Exception tree of cache_service. Every class sits under `CacheServiceError`, so a caller can
catch "the shared cache failed" in one clause; none of them is a dgemm exception (this package
sits below dgemm and never imports it: dgemm's adapter turns them into its own errors)."""
from __future__ import annotations


class CacheServiceError(Exception):
    """Root of every error cache_service raises on purpose."""


class RemoteUnavailable(CacheServiceError):
    """The remote cache cannot be used right now: the call failed (`cause` is the Redis error)
    or the breaker is open and refused it without trying (`cause` is None)."""

    def __init__(self, message: str, cause: BaseException = None):
        super().__init__(message)
        self.cause = cause


class LeaseNotOwnedError(CacheServiceError):
    """The lease expired or another node took it over; the operation was not performed."""


class BuildFailed(CacheServiceError):
    """Another node's build of this key failed recently; its message and `log` are replayed
    here instead of building again (see `RemoteCache.single_flight`)."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log
