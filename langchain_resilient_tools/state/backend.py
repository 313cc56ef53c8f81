"""State backends: where the breaker, the dedup ledger and the caches keep shared state.

By default every adapter keeps its breaker, dedup ledger and result caches in its own
process (cachetools structures on the stages: nothing to set up, sub-microsecond).
Several workers share that state through a `StateBackend` over LangGraph's
`BaseStore`: the store passed as ``store=`` to an adapter, or the graph's own store
(``runtime.store``) for tools whose policy says ``Shared(backend="store")``.

Operations and their consistency (values expire at ``clock() + ttl``). `clock` is the
store's clock where the store has one we can read: `PostgresBackend`'s is the local clock
corrected by its offset to the server's (`state.limits.StoreClock`), so workers whose
clocks disagree still agree on expiry; a SQLite file is one machine's. Elsewhere it is
each worker's wall time, and the workers' clocks must agree to well within the shortest
TTL. Limits shared across workers are `state.limits`.

======== =============================== ============================================
op       `PostgresBackend`               `StoreBackend` (any other `BaseStore`)
======== =============================== ============================================
get      read committed; expired = none  the store's read; expired = none
put      atomic upsert (last write wins) the store's put (last write wins)
claim    atomic insert-if-absent-or-     get then put under a process lock: atomic
         expired (``INSERT ... ON        within one process only (``InMemoryStore``
         CONFLICT ... WHERE expired``):  is one process anyway); two processes on a
         exactly one caller wins         store without CAS may both win
delete   atomic                          the store's delete
======== =============================== ============================================

LangGraph's own ``InMemoryStore`` is read and written in place, the same items without
its batch API (`state.inmemory.InMemoryStoreBackend`). On Redis
(`state.redis.RedisBackend`) each operation is one command (``GET``, ``SET ... PX``,
``SET ... NX PX``, ``DEL``) with the expiry and the clock on the server: claim is atomic
across processes; what may be lost is said there.

`put_unsynced` (a function: a backend may offer the method) is a put that need not wait
for the disk where the backend can skip it: what outlives the process but may be lost
with the machine (`state.sqlite`, `state.postgres`; elsewhere a put).

`claim` decides what must happen once: which worker runs a non-idempotent call, which
worker sends the half-open probe. Every failure of the store (network partition, lost
connection, timeout) is raised as `BackendError`; what a stage then does is set by
`Shared.on_error` (see `pipeline.shared`).
"""

from __future__ import annotations

import base64
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from cachetools import TTLCache
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import BaseStore, Item

from ..core.errors import BackendError
from .limits import MemoryLimits

NAMESPACE = "langchain_resilient_tools"
"""First element of every namespace this package writes into a `BaseStore`."""
TABLE = "lrt_state"
"""The table `PostgresBackend` keeps its entries in (created on first use)."""

_serde = JsonPlusSerializer()


_LOCK_ERRORS = frozenset({"LockNotAvailable", "SerializationFailure", "DeadlockDetected"})
"""psycopg's errors for a lock another transaction held (named, not imported)."""


def is_lock_wait(exc: BaseException) -> bool:
    """Whether a store's own error `exc` is a wait for another writer's lock."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text
    return any(cls.__name__ in _LOCK_ERRORS for cls in type(exc).__mro__)


@runtime_checkable
class StateBackend(Protocol):
    """What the breaker, the dedup ledger and the caches need from a shared store."""

    clock: Callable[[], float]
    """Wall-clock seconds, the same on every worker (expiry and ages)."""

    def get(self, ns: str, key: str) -> Any | None:
        """The live value at (`ns`, `key`), or `None`."""

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        """Store `value`, live for `ttl` seconds (overwrites)."""

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        """Store `value` only if no live value is there; `True` for the one caller that did."""

    def delete(self, ns: str, key: str) -> None:
        """Forget (`ns`, `key`)."""


def put_unsynced(backend: StateBackend, ns: str, key: str, value: Any, *, ttl: float) -> None:
    """`backend.put`, where the backend can commit it without waiting for the disk: it
    outlives this process (a SIGKILL, an out-of-memory kill) as a put does, but a power
    loss or a crash of the database server may lose it with the last moments before it
    (SQLite in WAL mode: ``synchronous=NORMAL``; PostgreSQL: ``synchronous_commit=off``
    for that one transaction). What must outlive the machine (a write's intent) uses
    `put` or `claim`."""
    put = getattr(backend, "put_unsynced", None)
    if put is None:
        backend.put(ns, key, value, ttl=ttl)
    else:
        put(ns, key, value, ttl=ttl)


class Record(dict[str, Any]):
    """A value made of JSON types alone (strings, numbers, booleans, `None`, and lists
    and dicts of them), built by this package (the journal's entries): a store that
    keeps JSON keeps it as it is (`StoreBackend`), with no encoding of ours first."""

    __slots__ = ()


def encode(value: Any) -> dict[str, Any]:
    """A JSON-safe form of any value LangGraph can checkpoint (messages, pydantic, ...);
    a `Record` as it is."""
    if type(value) is Record:
        return {"j": value}
    kind, data = _serde.dumps_typed(value)
    return {"t": kind, "d": base64.b64encode(data).decode()}


def decode(data: dict[str, Any]) -> Any:
    plain = data.get("j")
    if plain is not None:
        return plain
    return _serde.loads_typed((data["t"], base64.b64decode(data["d"])))


class MemoryBackend(MemoryLimits):
    """An in-process backend over a cachetools `TTLCache` (thread-safe, atomic claim);
    its limits (`state.limits.LimitBackend`) are shared by every adapter given it."""

    def __init__(self, *, maxsize: int = 65536, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.clock = clock
        self._data: TTLCache[tuple[str, str], tuple[Any, float]] = TTLCache(
            maxsize, ttl=float("inf"), timer=clock
        )
        self._lock = threading.Lock()

    def _live(self, k: tuple[str, str]) -> Any | None:
        found = self._data.get(k)
        if found is None or found[1] <= self.clock():
            return None
        return found

    def get(self, ns: str, key: str) -> Any | None:
        with self._lock:
            found = self._live((ns, key))
        return None if found is None else found[0]

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        with self._lock:
            self._data[ns, key] = (value, self.clock() + ttl)

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        with self._lock:
            if self._live((ns, key)) is not None:
                return False
            self._data[ns, key] = (value, self.clock() + ttl)
            return True

    def delete(self, ns: str, key: str) -> None:
        with self._lock:
            self._data.pop((ns, key), None)


class _Guard:
    """`guard_store`'s context manager (a class: entered on every store operation)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None or isinstance(exc, BackendError) or not isinstance(exc, Exception):
            return  # nothing, ours, or not a failure (a cancellation, an exit): as it is
        raise store_failed(exc) from exc  # any store failure: the caller's policy decides


def store_failed(exc: Exception) -> BackendError:
    """The `BackendError` for a store client's own failure `exc` (``lock_wait`` set when
    the store was waiting on a lock)."""
    return BackendError(f"state store failed: {type(exc).__name__}", lock_wait=is_lock_wait(exc))


_GUARD = _Guard()


def guard_store() -> _Guard:
    """Turn any failure of a store's client into a `BackendError` (``lock_wait`` set when
    the store was waiting on a lock); a `BackendError` passes as it is."""
    return _GUARD


class StoreBackend:
    """A backend over any LangGraph `BaseStore` (e.g. ``InMemoryStore``).

    Values are kept as ``{"exp": expiry, "t": type, "d": data}`` (a `Record`: ``{"exp":
    expiry, "j": record}``, the store's JSON alone) under the namespace ``(NAMESPACE,
    ns)``; expiry is checked on read, and handed to the store as its own
    TTL where the store supports one (so that it sweeps old entries).
    """

    def __init__(self, store: BaseStore, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._lock = threading.Lock()
        self._ttl = bool(store.supports_ttl)
        self._ns: dict[str, tuple[str, str]] = {}

    def _where(self, ns: str) -> tuple[str, str]:
        where = self._ns.get(ns)
        if where is None:
            where = self._ns[ns] = (NAMESPACE, ns)
        return where

    def _live(self, item: Item | None) -> Any | None:
        """`item`'s value as it was put, unless there is none or it has expired."""
        if item is None or float(item.value.get("exp", 0.0)) <= self.clock():
            return None
        return decode(item.value)

    def _stored(self, value: Any, ttl: float) -> dict[str, Any]:
        """What the store keeps for `value`, expiring in `ttl` seconds."""
        exp = self.clock() + ttl
        return {"exp": exp, "j": value} if type(value) is Record else {"exp": exp, **encode(value)}

    def _get(self, ns: str, key: str) -> Any | None:
        return self._live(self.store.get(self._where(ns), key))

    def _put(self, ns: str, key: str, value: Any, ttl: float) -> None:
        data = self._stored(value, ttl)
        if self._ttl:  # the store's own expiry (minutes), so that it sweeps old entries
            self.store.put(self._where(ns), key, data, index=False, ttl=max(ttl / 60.0, 1.0))
        else:
            self.store.put(self._where(ns), key, data, index=False)

    # Each operation turns the store client's failures into `BackendError`s
    # (`store_failed`), as `guard_store` does, without a context manager's calls.

    def get(self, ns: str, key: str) -> Any | None:
        try:
            return self._get(ns, key)
        except BackendError:
            raise
        except Exception as exc:
            raise store_failed(exc) from exc

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        try:
            self._put(ns, key, value, ttl)
        except BackendError:
            raise
        except Exception as exc:
            raise store_failed(exc) from exc

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        try:
            with self._lock:
                if self._get(ns, key) is not None:
                    return False
                self._put(ns, key, value, ttl)
                return True
        except BackendError:
            raise
        except Exception as exc:
            raise store_failed(exc) from exc

    def delete(self, ns: str, key: str) -> None:
        with guard_store():
            self.store.delete(self._where(ns), key)
