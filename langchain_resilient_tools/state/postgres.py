"""The shared backend on LangGraph's ``PostgresStore`` or ``AsyncPostgresStore`` (or the
database of a ``PostgresSaver`` / ``AsyncPostgresSaver``): atomic operations in one small
table (`state.table`).

`BaseStore` has no compare-and-set, so this backend does not go through the store's
items: it uses the store's own connection (a psycopg ``Connection`` in autocommit mode,
or a ``ConnectionPool``; for a saver or an async store, a sync connection of its own to
the same database, `OwnConnection`) and the table `TABLE`, created on first use::

    ns text, key text, kind text, data bytea, expires_at double precision,
    PRIMARY KEY (ns, key)
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
from .table import TableBackend, statements

_SETUP = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    ns text NOT NULL, key text NOT NULL, kind text NOT NULL, data bytea NOT NULL,
    expires_at double precision NOT NULL, PRIMARY KEY (ns, key))"""


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


class PostgresBackend(TableBackend):
    """A `StateBackend` on a ``PostgresStore``'s connection (see the module docstring)."""

    sql = statements("%s")

    def __init__(self, store: Any, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock=clock)
        self.store = store
        self._made = False
        self._lock = threading.Lock()

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
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
