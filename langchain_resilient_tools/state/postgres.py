"""The shared backend on LangGraph's ``PostgresStore`` or ``AsyncPostgresStore`` (or the
database of a ``PostgresSaver`` / ``AsyncPostgresSaver``): atomic operations in one small
table (`state.table`).

`BaseStore` has no compare-and-set, so this backend does not go through the store's
items: it uses the store's own connection (a psycopg ``Connection`` in autocommit mode,
or a ``ConnectionPool``; for a saver or an async store, a sync connection of its own to
the same database, `OwnConnection`) and the table `TABLE`, created on first use::

    ns text, key text, kind text, data bytea, expires_at double precision,
    PRIMARY KEY (ns, key)

Each operation is one autocommitted statement, as durable as the server makes a commit
(``synchronous_commit``, on by default: the WAL is flushed before it returns), except
`put_unsynced` (the journal's receipt), whose transaction sets ``synchronous_commit``
off for itself: committed and visible to every session when it returns, so a worker
that dies after it loses nothing, but a crash of the server (or its machine) within
the WAL writer's delay may undo it (the next flushed commit flushes it too).

Time is the database's: `PostgresBackend.clock` is the local clock plus its offset to
the server's ``clock_timestamp()`` (`state.limits.StoreClock`, measured every few
seconds), so entries, the breaker's recovery time and the journal's leases expire at
the same moment for workers whose own clocks disagree.

Shared limits (`state.limits.LimitBackend`) live in two tables of their own, created on
their first use; each decision is one ``INSERT ... ON CONFLICT (key) DO UPDATE``
statement, which locks the key's row and reads its latest version, so concurrent
decisions on one key are serialized by the database and timed by its
``clock_timestamp()``::

    lrt_buckets (key text PRIMARY KEY, tat, wait, at double precision)
        -- a token bucket as its theoretical arrival time (`state.limits.gcra`)
    lrt_leases (key text PRIMARY KEY, holders jsonb)
        -- {holder: expiry}; expired holders are dropped by the next acquire
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.postgres import PostgresStore  # ImportError: `as_backend` falls back
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg.rows import tuple_row

from .backend import TABLE, guard_store
from .limits import StoreClock
from .table import TableBackend, statements

_SETUP = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    ns text NOT NULL, key text NOT NULL, kind text NOT NULL, data bytea NOT NULL,
    expires_at double precision NOT NULL, PRIMARY KEY (ns, key))"""


_PUT_UNSYNCED = f"""INSERT INTO {TABLE} (ns, key, kind, data, expires_at)
    SELECT %s, %s, %s, %s::bytea, %s::double precision
    FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unsynced WHERE true
    ON CONFLICT (ns, key) DO UPDATE SET kind = excluded.kind, data = excluded.data,
    expires_at = excluded.expires_at"""
"""`put` committed without waiting for the WAL to reach the disk: ``synchronous_commit``
is set off for the statement's own transaction (``set_config(..., true)`` lasts until
its commit, which reads it), in one round trip (a ``SET LOCAL`` needs a transaction
block: three more)."""


def is_postgres_store(store: BaseStore) -> bool:
    return isinstance(store, (PostgresStore, AsyncPostgresStore))


def store_backend(store: Any, *, clock: Callable[[], float] = time.time) -> PostgresBackend:
    """The backend of a ``PostgresStore`` (on its connection) or of an
    ``AsyncPostgresStore`` (on a sync connection of its own to the same database)."""
    if isinstance(store, AsyncPostgresStore):
        return PostgresBackend(OwnConnection(store.conn), clock=clock)
    return PostgresBackend(store, clock=clock)


def _is_async_pool(conn: Any) -> bool:
    return any(cls.__name__ == "AsyncConnectionPool" for cls in type(conn).__mro__)


class OwnConnection:
    """A connection of our own to the database of a psycopg connection that is someone
    else's (a ``PostgresSaver``'s, which runs its statements in pipeline mode under its
    own lock: sharing it would interleave with them; an async one, which lives on its
    event loop). Opened on first use, autocommit, with the same connection parameters
    and password; a sync pool is shared as it is (each operation takes its own
    connection from it)."""

    def __init__(self, theirs: Any) -> None:
        self._theirs = theirs
        self._conn: Any = None
        self._lock = threading.Lock()

    @property
    def conn(self) -> Any:
        theirs = self._theirs
        if callable(getattr(theirs, "connection", None)) and not _is_async_pool(theirs):
            return theirs  # a ConnectionPool
        with self._lock:
            if self._conn is None or self._conn.closed:
                import psycopg

                conninfo, kwargs = _connect_args(theirs)
                kwargs.update(autocommit=True, prepare_threshold=0)
                self._conn = psycopg.connect(conninfo, **kwargs)
                weakref.finalize(self, self._conn.close)  # closed with this object
            return self._conn


def _connect_args(theirs: Any) -> tuple[str, dict[str, Any]]:
    """How to connect to the database of `theirs`: a (sync or async) connection, or an
    ``AsyncConnectionPool`` (its connection string and arguments)."""
    info = getattr(theirs, "info", None)
    if info is not None:
        return info.dsn, {"password": info.password}
    kwargs = theirs.kwargs if isinstance(theirs.kwargs, dict) else {}
    return str(theirs.conninfo), {k: v for k, v in kwargs.items() if k != "row_factory"}


BUCKETS, LEASES = "lrt_buckets", "lrt_leases"
"""The tables of the shared limits (made on their first use)."""
_LIMITS_SETUP = (
    f"""CREATE TABLE IF NOT EXISTS {BUCKETS} (key text PRIMARY KEY, tat double precision
    NOT NULL, wait double precision NOT NULL, at double precision NOT NULL)""",
    f"CREATE TABLE IF NOT EXISTS {LEASES} (key text PRIMARY KEY, holders jsonb NOT NULL)",
)
_NOW = "extract(epoch FROM clock_timestamp())::double precision"
_TAKE = f"""INSERT INTO {BUCKETS} AS b (key, tat, wait, at)
    VALUES (%(key)s, {_NOW} + %(interval)s, 0, {_NOW})
    ON CONFLICT (key) DO UPDATE SET
    tat = CASE WHEN greatest(b.tat, excluded.at) - excluded.at <= %(tolerance)s
        THEN greatest(b.tat, excluded.at) + %(interval)s ELSE b.tat END,
    wait = greatest(0, greatest(b.tat, excluded.at) - %(tolerance)s - excluded.at),
    at = excluded.at
    RETURNING wait"""
_LIVE = f"FROM jsonb_each({LEASES}.holders) e WHERE (e.value)::double precision > {_NOW}"
_ACQUIRE = f"""INSERT INTO {LEASES} (key, holders)
    VALUES (%(key)s, jsonb_build_object(%(holder)s::text, {_NOW} + %(ttl)s))
    ON CONFLICT (key) DO UPDATE SET holders =
    (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{{}}'::jsonb) {_LIVE})
    || excluded.holders
    WHERE (SELECT count(*) {_LIVE}) < %(cap)s
    RETURNING 1"""
_RENEW = f"""UPDATE {LEASES} SET holders = jsonb_set(holders, ARRAY[%(holder)s::text],
    to_jsonb({_NOW} + %(ttl)s)) WHERE key = %(key)s
    AND (holders ->> %(holder)s::text)::double precision > {_NOW} RETURNING 1"""
_RELEASE = f"UPDATE {LEASES} SET holders = holders - %(holder)s::text WHERE key = %(key)s"


class PostgresBackend(TableBackend):
    """A `StateBackend` and `LimitBackend` on a ``PostgresStore``'s connection (see the
    module docstring); `clock` is the database's (`local_clock` corrected)."""

    sql = statements("%s", put_unsynced=_PUT_UNSYNCED)

    def __init__(self, store: Any, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock=clock)
        self.store = store
        self._made = self._limits_made = False
        self._lock = threading.Lock()
        self.clock = StoreClock(clock, self._server_time)

    def _server_time(self) -> float:
        with guard_store():
            row = self._run(f"SELECT {_NOW}")
        assert row is not None
        return float(row[0])

    def _run(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
        conn = self.store.conn
        getter = getattr(conn, "connection", None)  # a pool hands out connections
        with getter() if callable(getter) else nullcontext(conn) as c:
            with c.cursor(row_factory=tuple_row) as cur:
                cur.execute(sql, params)
                row = cur.fetchone() if cur.description is not None else None
            if not c.autocommit:
                c.commit()
        return row

    def setup(self) -> None:
        """Create the table if it is missing (done on first use; safe to repeat)."""
        with guard_store(), self._lock:
            if not self._made:
                try:
                    self._run(_SETUP)
                except Exception:  # two workers creating it at once: one of them loses
                    self._run(_SETUP)
                self._made = True

    def _ready(self) -> None:
        if not self._made:
            self.setup()

    # -- shared limits (`state.limits.LimitBackend`) -----------------------------------

    def _limit(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """Run one limit decision (the limit tables made first, once)."""
        with guard_store():
            if not self._limits_made:
                with self._lock:
                    for setup in _LIMITS_SETUP:
                        try:
                            self._run(setup)
                        except Exception:  # two workers creating it at once: one loses
                            self._run(setup)
                    self._limits_made = True
            return self._run(sql, params)

    def now(self) -> float:
        return self.clock()

    def take_token(self, key: str, *, rate: float, burst: float) -> float:
        params = {"key": key, "interval": 1.0 / rate, "tolerance": (burst - 1.0) / rate}
        row = self._limit(_TAKE, params)
        assert row is not None
        return float(row[0])

    def acquire_lease(self, key: str, *, cap: int, holder: str, ttl: float) -> bool:
        params = {"key": key, "cap": cap, "holder": holder, "ttl": ttl}
        return self._limit(_ACQUIRE, params) is not None

    def renew_lease(self, key: str, *, holder: str, ttl: float) -> bool:
        return self._limit(_RENEW, {"key": key, "holder": holder, "ttl": ttl}) is not None

    def release_lease(self, key: str, *, holder: str) -> None:
        self._limit(_RELEASE, {"key": key, "holder": holder})
