"""Connections to LangGraph's checkpointers and stores, opened one way everywhere.

PostgreSQL connections take the options LangGraph's `PostgresSaver` and `PostgresStore`
need (autocommit, rows as dicts, statements prepared at once); SQLite files are opened
for use from several threads. With an `ExitStack`, a connection is closed when it ends.
"""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from pathlib import Path
from typing import Any


def pg_options() -> dict[str, Any]:
    """The options of a connection LangGraph's PostgreSQL saver and store work on."""
    from psycopg.rows import dict_row

    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def pg_connect(url: str, stack: ExitStack | None = None) -> Any:
    """A `psycopg` connection to `url` with `pg_options`, closed with `stack`."""
    import psycopg

    conn = psycopg.connect(url, **pg_options())
    if stack is not None:
        stack.callback(conn.close)
    return conn


def sqlite_connect(
    path: str | Path, stack: ExitStack | None = None, **options: Any
) -> sqlite3.Connection:
    """`sqlite3.connect(path)` usable from any thread (LangGraph's savers and stores run
    on worker threads), with `options` (``timeout``, ``isolation_level``); closed with
    `stack`."""
    conn = sqlite3.connect(path, check_same_thread=False, **options)
    if stack is not None:
        stack.callback(conn.close)
    return conn


def sqlite_store(path: str | Path, stack: ExitStack | None = None, **options: Any) -> Any:
    """LangGraph's `SqliteStore` on `path`, its connection opened as its
    `from_conn_string` opens it (autocommit: ``isolation_level=None``)."""
    from langgraph.store.sqlite import SqliteStore

    return SqliteStore(sqlite_connect(path, stack, isolation_level=None, **options))
