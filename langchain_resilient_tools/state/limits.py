"""Limits shared by every worker: a token bucket and a concurrency cap kept in a store.

`Limits(max_concurrency=, rate_limit=)` holds per process unless the tool's state is
shared (`Shared`): then each decision is one atomic operation of the store, timed by
the store's own clock, so N workers against one limit of R per second send at most R
(+ the burst) per second together, and hold at most ``max_concurrency`` slots at once.
A worker that dies keeps its slots only until their lease expires.

A backend that can share limits implements `LimitBackend` beside `StateBackend`
(`state.backend`); `supports_limits` tells whether one does. Which do:

- `MemoryBackend`: one process (every adapter given the same backend shares its limits);
- `PostgresBackend` (`state.postgres`): one ``INSERT ... ON CONFLICT DO UPDATE``
  statement per decision, timed by the database's ``clock_timestamp()``;
- `SqliteBackend` (`state.sqlite`): one ``BEGIN IMMEDIATE`` transaction per decision on
  one machine's file, timed by that machine's clock;
- `RedisBackend` (`state.redis`): one Lua script per decision, timed by the server;
- not `StoreBackend` (any other `BaseStore`): it has no atomic read-modify-write, so the
  limit stage keeps its per-process limits there, and says so once.

The bucket is the generic cell rate algorithm (`gcra`): one number per key, the
"theoretical arrival time" of the next token, so a decision reads and writes one value.
It is a token bucket of `burst` tokens refilled at `rate` per second: in any window of
t seconds at most ``rate * t + burst`` tokens are taken.

`StoreClock` gives a backend the store's clock for its other expiries too (the
breaker's recovery time, the journal's leases, entries' TTLs): the local clock plus the
offset to the store's, measured now and then, so workers whose clocks disagree agree on
when something expires.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

CLOCK_REFRESH_S = 5.0
"""Seconds (of `time.monotonic`) a measured offset to the store's clock is used before
it is measured again."""


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


def gcra(tat: float | None, now: float, *, rate: float, burst: float) -> tuple[float, float]:
    """One token bucket decision: ``(the bucket's next tat, wait)``, where `tat` is the
    bucket's theoretical arrival time (`None`: a new, full bucket) and `wait` is ``0.0``
    when a token was taken, else the seconds until one will be there (then the returned
    tat is the old one: nothing was taken)."""
    interval, tolerance = 1.0 / rate, (burst - 1.0) / rate
    due = now if tat is None else max(tat, now)
    if due - now <= tolerance:
        return due + interval, 0.0
    return due, due - tolerance - now


class MemoryLimits:
    """`LimitBackend` in this process's memory (atomic under one lock), on `clock`."""

    clock: Callable[[], float]

    def __init__(self) -> None:
        self._limits_lock = threading.Lock()
        self._buckets: dict[str, float] = {}
        self._leases: dict[str, dict[str, float]] = {}

    def now(self) -> float:
        return self.clock()

    def take_token(self, key: str, *, rate: float, burst: float) -> float:
        with self._limits_lock:
            tat, wait = gcra(self._buckets.get(key), self.clock(), rate=rate, burst=burst)
            self._buckets[key] = tat
            return wait

    def acquire_lease(self, key: str, *, cap: int, holder: str, ttl: float) -> bool:
        with self._limits_lock:
            now = self.clock()
            live = {h: t for h, t in self._leases.get(key, {}).items() if t > now}
            self._leases[key] = live
            if len(live) >= cap:
                return False
            live[holder] = now + ttl
            return True

    def renew_lease(self, key: str, *, holder: str, ttl: float) -> bool:
        with self._limits_lock:
            now, leases = self.clock(), self._leases.get(key, {})
            if leases.get(holder, now) <= now:
                return False
            leases[holder] = now + ttl
            return True

    def release_lease(self, key: str, *, holder: str) -> None:
        with self._limits_lock:
            self._leases.get(key, {}).pop(holder, None)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class StoreClock:
    """The store's clock as a callable: `local` plus the offset to the store's clock
    (`sample`: the store's time, one round trip), measured on first use and again after
    `CLOCK_REFRESH_S`. Read on an event loop, it never waits for the store: the offset
    is measured on a thread of its own meanwhile (the last one is used, none at first).
    A failed measurement keeps the last offset and is tried again a second later: the
    store's own operations then fail and say why."""

    def __init__(self, local: Callable[[], float], sample: Callable[[], float]) -> None:
        self.local = local
        self._sample = sample
        self.offset = 0.0
        """Seconds the store's clock is ahead of `local` (as last measured)."""
        self._due = float("-inf")
        self._lock = threading.Lock()

    def __call__(self) -> float:
        if time.monotonic() >= self._due:
            if _on_event_loop():
                self._due = time.monotonic() + 1.0  # one thread at a time
                threading.Thread(target=self.refresh, name="lrt-store-clock", daemon=True).start()
            else:
                self.refresh(wait=False)
        return self.local() + self.offset

    def refresh(self, *, wait: bool = True) -> None:
        """Measure the offset now (the store's time against the middle of the round
        trip); unless `wait`, not while another thread measures it (that one's offset,
        or the last, is good enough)."""
        if not self._lock.acquire(blocking=wait):
            return
        try:
            if not wait and time.monotonic() < self._due:
                return  # another thread just did it
            before = self.local()
            try:
                theirs = self._sample()
            except Exception:  # the store is down: its operations will say so
                self._due = time.monotonic() + 1.0
                return
            self.offset = theirs - (before + self.local()) / 2
            self._due = time.monotonic() + CLOCK_REFRESH_S
        finally:
            self._lock.release()
