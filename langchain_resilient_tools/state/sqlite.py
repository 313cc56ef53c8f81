"""The shared backend on a SQLite database file: atomic operations in one small table.

Used for LangGraph's ``SqliteStore`` given as ``store=`` and for the database of a
``SqliteSaver`` checkpointer (the write journal of a graph with a checkpointer and no
store, `pipeline.journal.where`). Like `state.postgres`, it keeps the table of
`state.table`, created on first use, in the same database file, through a connection of
its own (the store's or saver's connection is theirs)::

    ns text, key text, kind text, data blob, expires_at real, PRIMARY KEY (ns, key)

Each operation is one autocommitted statement (in WAL mode, as LangGraph's SqliteSaver
sets the file, with SQLite's default full sync: one fsync per commit), so it is durable
when it returns, against a crash of the process and of the machine, and atomic by
itself: of several processes claiming one key exactly one wins.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .backend import TABLE
from .table import TableBackend, statements

_SETUP = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    ns TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, data BLOB NOT NULL,
    expires_at REAL NOT NULL, PRIMARY KEY (ns, key))"""


def database_file(conn: Any) -> str | None:
    """The file behind a ``sqlite3.Connection``, or an ``aiosqlite`` one (by the path it
    was opened with); `None` for an in-memory database."""
    if not isinstance(conn, sqlite3.Connection):
        path = _aiosqlite_path(conn)
        return path if path and path != ":memory:" and not path.startswith("file::memory") else None
    try:
        rows = conn.execute("PRAGMA database_list").fetchall()
    except sqlite3.Error:
        return None
    path = next((row[2] for row in rows if row[1] == "main"), "")
    return path or None


def _aiosqlite_path(conn: Any) -> str:
    """The database an ``aiosqlite.Connection`` was opened on (its connector keeps it as
    ``database``); ``""`` when it cannot be read."""
    connector = getattr(conn, "_connector", None)
    code, cells = getattr(connector, "__code__", None), getattr(connector, "__closure__", None)
    if code is None or not cells:
        return ""
    found = dict(zip(code.co_freevars, cells, strict=False)).get("database")
    try:
        value = found.cell_contents if found is not None else ""
    except ValueError:  # an empty cell
        return ""
    return str(value) if isinstance(value, (str, os.PathLike)) else ""


class SqliteBackend(TableBackend):
    """A `StateBackend` in a SQLite file (see the module docstring)."""

    sql = statements("?")

    def __init__(self, path: str, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock=clock)
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        with self._lock:
            if self._conn is None:
                conn = sqlite3.connect(
                    self.path, check_same_thread=False, isolation_level=None, timeout=10.0
                )
                # Closed with the backend (Python 3.13 warns about a connection left open).
                weakref.finalize(self, conn.close)
                conn.execute("PRAGMA journal_mode=WAL")  # as LangGraph's SqliteSaver sets it
                conn.execute(_SETUP)
                self._conn = conn
            row: tuple[Any, ...] | None = self._conn.execute(sql, params).fetchone()
            return row

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
