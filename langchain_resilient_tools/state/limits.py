"""Limits shared by every worker: a token bucket and a concurrency cap kept in a store.

`Limits(max_concurrency=, rate_limit=)` holds per process unless the tool's state is
shared (`Shared`): then each decision is one atomic operation of the store, timed by
the store's own clock, so N workers against one limit of R per second send at most R
(+ the burst) per second together, and hold at most ``max_concurrency`` slots at once.
A worker that dies keeps its slots only until their lease expires.

A backend that can share limits implements `LimitBackend` beside `StateBackend`
(`state.backend`); `supports_limits` tells whether one does.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class LimitBackend(Protocol):
    """Atomic limit decisions in a shared store (every time from the store's clock)."""

    def now(self) -> float:
        """The store's own clock, in seconds (the same for every worker)."""

    def take_token(self, key: str, *, rate: float, burst: float) -> float:
        """Take one token from bucket `key`, refilled at `rate` tokens per second and
        holding at most `burst`; a new bucket starts full. ``0.0`` when one was taken,
        else the seconds until one will be there (nothing taken). One atomic decision."""

    def acquire_lease(self, key: str, *, cap: int, holder: str, ttl: float) -> bool:
        """Take one of `cap` slots of `key` for `holder` (unique per attempt), held until
        released or for `ttl` seconds; `False` (nothing taken) when all `cap` live
        leases are held. Expired leases do not count. One atomic decision."""

    def renew_lease(self, key: str, *, holder: str, ttl: float) -> bool:
        """Extend `holder`'s lease on `key` to `ttl` seconds from now; `False` when it
        has expired (or was never taken)."""

    def release_lease(self, key: str, *, holder: str) -> None:
        """Give `holder`'s slot of `key` back (nothing when it has none)."""


def supports_limits(backend: object) -> bool:
    """Whether `backend` can share limits across workers."""
    return isinstance(backend, LimitBackend)
