"""The shared backend on LangGraph's ``PostgresStore``: atomic operations in one small table.

`BaseStore` has no compare-and-set, so this backend does not go through the store's
items: it uses the store's own connection (a psycopg ``Connection`` in autocommit mode,
or a ``ConnectionPool``) and a table of its own, `TABLE`, created on first use::

    ns text, key text, kind text, data bytea, expires_at double precision,
    PRIMARY KEY (ns, key)

Every operation is one statement, so each is atomic by itself. `claim` is
``INSERT ... ON CONFLICT (ns, key) DO UPDATE ... WHERE <the row has expired>``: of any
number of workers claiming the same key, exactly one gets a row back. Expired rows are
ignored on read and deleted now and then by `put`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import BaseStore
from langgraph.store.postgres import PostgresStore  # ImportError: `as_backend` falls back
from psycopg.rows import tuple_row

from .backend import TABLE, _guard

_serde = JsonPlusSerializer()
SWEEP_EVERY = 500
"""`put`s between two deletions of expired rows."""

_SETUP = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    ns text NOT NULL, key text NOT NULL, kind text NOT NULL, data bytea NOT NULL,
    expires_at double precision NOT NULL, PRIMARY KEY (ns, key))"""
_GET = f"SELECT kind, data FROM {TABLE} WHERE ns = %s AND key = %s AND expires_at > %s"
_PUT = f"""INSERT INTO {TABLE} (ns, key, kind, data, expires_at) VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (ns, key) DO UPDATE SET kind = EXCLUDED.kind, data = EXCLUDED.data,
    expires_at = EXCLUDED.expires_at"""
_CLAIM = _PUT + f" WHERE {TABLE}.expires_at <= %s RETURNING 1"
_DELETE = f"DELETE FROM {TABLE} WHERE ns = %s AND key = %s"
_SWEEP = f"DELETE FROM {TABLE} WHERE expires_at <= %s"


def is_postgres_store(store: BaseStore) -> bool:
    return isinstance(store, PostgresStore)


class OwnConnection:
    """A connection of our own to the database of a psycopg connection that is someone
    else's (a ``PostgresSaver``'s, which runs its statements in pipeline mode under its
    own lock: sharing it would interleave with them). Opened on first use, autocommit,
    with the same connection parameters and password; a pool is shared as it is (each
    operation takes its own connection from it)."""

    def __init__(self, theirs: Any) -> None:
        self._theirs = theirs
        self._conn: Any = None
        self._lock = threading.Lock()

    @property
    def conn(self) -> Any:
        if callable(getattr(self._theirs, "connection", None)):
            return self._theirs  # a ConnectionPool
        with self._lock:
            if self._conn is None or self._conn.closed:
                import psycopg

                info = self._theirs.info
                self._conn = psycopg.connect(
                    info.dsn, password=info.password, autocommit=True, prepare_threshold=0
                )
            return self._conn


class PostgresBackend:
    """A `StateBackend` on a ``PostgresStore``'s connection (see the module docstring)."""

    def __init__(self, store: Any, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._ready = False
        self._puts = 0
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
        with _guard(), self._lock:
            if not self._ready:
                try:
                    self._run(_SETUP)
                except Exception:  # two workers creating it at once: one of them loses
                    self._run(_SETUP)
                self._ready = True

    def get(self, ns: str, key: str) -> Any | None:
        if not self._ready:
            self.setup()
        with _guard():
            row = self._run(_GET, (ns, key, self.clock()))
            return None if row is None else _serde.loads_typed((row[0], bytes(row[1])))

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        if not self._ready:
            self.setup()
        now = self.clock()
        with _guard():
            self._run(_PUT, (ns, key, *_serde.dumps_typed(value), now + ttl))
            self._puts += 1
            if self._puts % SWEEP_EVERY == 0:
                self._run(_SWEEP, (now,))

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        if not self._ready:
            self.setup()
        now = self.clock()
        with _guard():
            row = self._run(_CLAIM, (ns, key, *_serde.dumps_typed(value), now + ttl, now))
            return row is not None

    def delete(self, ns: str, key: str) -> None:
        if not self._ready:
            self.setup()
        with _guard():
            self._run(_DELETE, (ns, key))
