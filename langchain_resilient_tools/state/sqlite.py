"""The shared backend on a SQLite database file: atomic operations in one small table.

Used for LangGraph's ``SqliteStore`` given as ``store=`` and for the database of a
``SqliteSaver`` checkpointer (the write journal of a graph with a checkpointer and no
store, `pipeline.journal.where`). Like `state.postgres`, it keeps the table of
`state.table`, created on first use, in the same database file, through a connection of
its own (the store's or saver's connection is theirs)::

    ns text, key text, kind text, data blob, expires_at real, PRIMARY KEY (ns, key)

Each operation is one autocommitted statement, atomic by itself (of several processes
claiming one key exactly one wins), in WAL mode as LangGraph's SqliteSaver sets the
file, at ``synchronous=FULL`` (set on the connection, whatever SQLite was built with):
the WAL is synced at every commit, so an operation is durable when it returns, against
a crash of the process and of the machine. `put_unsynced` alone (the journal's receipt)
runs at ``synchronous=NORMAL`` in WAL mode: committed, so it outlives the process (the
commit is written to the WAL, in the operating system's hands), but not synced, so a
power loss may undo it and the last commits before it (never the file's integrity:
WAL's own guarantee); the next synced commit on the file (the next intent, the
checkpoint of a ``SqliteSaver`` on the same file) syncs it with its own. Outside WAL
mode, where ``NORMAL`` may corrupt a file on a power loss, it is synced like the rest.

First use is safe when several processes start on one file together (two replicas
resuming the same thread; a ``SqliteStore`` file nobody used the table in yet): the
connection waits up to `BUSY_TIMEOUT_S` for another writer's lock; the switch to WAL,
which SQLite refuses at once (no wait) while another process holds a lock or switches
the file itself, is skipped when the file is in WAL mode already, tried again a few times
(`WAL_RETRIES_S`, each try waiting at most `WAL_BUSY_S`), and given up without harm (each statement is atomic and durable in
SQLite's default rollback journal too); the table is made with ``CREATE TABLE IF NOT
EXISTS``, tried again while another process holds the lock to make it. A lock that still
stands is raised as a `BackendError` with ``lock_wait`` set (`state.backend.is_lock_wait`).

Shared limits (`state.limits.LimitBackend`) are kept in two more tables, made on their
first use: ``lrt_buckets (key, tat)`` and ``lrt_leases (key, holder, expires_at)``. Each
decision is one ``BEGIN IMMEDIATE`` transaction (the file's write lock, so processes on
the file decide one at a time), timed by this machine's clock (`clock`): a SQLite file
is shared by processes on one machine, which read one clock. They go through a
connection of their own with ``synchronous=NORMAL`` (no fsync per decision: a limit
need not outlive a power cut, and the file is never corrupted by one in WAL mode).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from .backend import TABLE, guard_store, is_lock_wait
from .limits import gcra
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


BUSY_TIMEOUT_S = 10.0
"""Seconds a statement waits for another connection's lock before it fails."""
WAL_RETRIES_S = (0.01, 0.05, 0.2)
"""Waits before the switch to WAL is tried again (SQLite refuses it at once while another
process holds a lock on the file)."""
WAL_BUSY_S = 0.2
"""Seconds one try of the switch to WAL waits for another connection's lock."""
SETUP_TRIES = 4
"""How many times the table's creation is tried while another process holds a lock."""
_LIMITS_SETUP = (
    "CREATE TABLE IF NOT EXISTS lrt_buckets (key TEXT PRIMARY KEY, tat REAL NOT NULL)",
    """CREATE TABLE IF NOT EXISTS lrt_leases (key TEXT NOT NULL, holder TEXT NOT NULL,
    expires_at REAL NOT NULL, PRIMARY KEY (key, holder))""",
)
T = TypeVar("T")


def _journal_mode(conn: sqlite3.Connection) -> str:
    conn.execute("PRAGMA schema_version").fetchone()  # reads the file's header
    return str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()


def _use_wal(conn: sqlite3.Connection, sleep: Callable[[float], None]) -> None:
    """Put the file in WAL mode, as LangGraph's SqliteSaver does, unless it is already or
    another process's lock keeps refusing the switch (see the module docstring)."""
    if _journal_mode(conn) == "wal":
        return
    # A reader's lock makes the switch wait: not long, it is not needed.
    conn.execute(f"PRAGMA busy_timeout = {int(WAL_BUSY_S * 1000)}")
    try:
        for wait in (*WAL_RETRIES_S, None):
            try:
                if _journal_mode(conn) != "wal":
                    conn.execute("PRAGMA journal_mode=WAL").fetchone()
                return
            except sqlite3.OperationalError as exc:
                if not is_lock_wait(exc):
                    raise
                if wait is None:
                    return  # still refused: carry on in the file's own journal mode
                sleep(wait)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


def _create(conn: sqlite3.Connection, sleep: Callable[[float], None]) -> None:
    """``CREATE TABLE IF NOT EXISTS``, tried again while another process holds the lock."""
    for attempt in range(SETUP_TRIES):
        try:
            conn.execute(_SETUP)
            return
        except sqlite3.OperationalError as exc:
            if not is_lock_wait(exc) or attempt == SETUP_TRIES - 1:
                raise
            sleep(WAL_RETRIES_S[min(attempt, len(WAL_RETRIES_S) - 1)])


FULL, NORMAL = 2, 1
"""``PRAGMA synchronous`` levels: FULL syncs the WAL at every commit; NORMAL, in WAL
mode, only at checkpoints."""


class SqliteBackend(TableBackend):
    """A `StateBackend` in a SQLite file (see the module docstring)."""

    sql = statements("?")

    def __init__(
        self, path: str, *, clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:  # fmt: skip
        super().__init__(clock=clock)
        self.path = path
        self._sleep = sleep
        """How the first use waits before it tries a refused step again."""
        self._conn: sqlite3.Connection | None = None
        self._limits_conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._wal = False
        """Whether the file is in WAL mode (seen when the connection was opened)."""
        self._synchronous = FULL
        """The connection's ``PRAGMA synchronous`` now."""
        self._unsynced = threading.local()
        """``on`` while this thread runs `put_unsynced` (its statement may skip the sync)."""

    def _open(self) -> sqlite3.Connection:
        """A connection to the file, in WAL mode if it can be, with the table made."""
        conn = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S
        )
        try:
            _use_wal(conn, self._sleep)
            _create(conn, self._sleep)
            conn.execute(f"PRAGMA synchronous = {FULL}")  # whatever SQLite was built with
        except BaseException:
            conn.close()
            raise
        # Closed with the backend (Python 3.13 warns about a connection left open).
        weakref.finalize(self, conn.close)
        return conn

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        with self._lock:
            if self._conn is None:
                self._conn = self._open()
                self._wal = _journal_mode(self._conn) == "wal"
                self._synchronous = FULL
            level = NORMAL if self._wal and getattr(self._unsynced, "on", False) else FULL
            if level != self._synchronous:
                self._conn.execute(f"PRAGMA synchronous = {level}")
                self._synchronous = level
            row: tuple[Any, ...] | None = self._conn.execute(sql, params).fetchone()
            return row

    def put_unsynced(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        """`put`, committed without syncing the file in WAL mode (``synchronous=NORMAL``):
        it survives this process's death (the commit is in the operating system's hands),
        not the machine's power loss, which may take the last commits with it (the file
        stays intact). Outside WAL mode, `put`."""
        self._unsynced.on = True
        try:
            super().put_unsynced(ns, key, value, ttl=ttl)
        finally:
            self._unsynced.on = False

    # -- shared limits (`state.limits.LimitBackend`) -----------------------------------

    def _atomic(self, work: Callable[[sqlite3.Connection, float], T]) -> T:
        """`work(connection, now)` in one ``BEGIN IMMEDIATE`` transaction."""
        with guard_store(), self._lock:
            if self._limits_conn is None:
                self._limits_conn = self._open()
                self._limits_conn.execute("PRAGMA synchronous = NORMAL")
            conn = self._limits_conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for setup in _LIMITS_SETUP:
                    conn.execute(setup)
                result = work(conn, self.clock())
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    def now(self) -> float:
        return self.clock()

    def take_token(self, key: str, *, rate: float, burst: float) -> float:
        def take(conn: sqlite3.Connection, now: float) -> float:
            row = conn.execute("SELECT tat FROM lrt_buckets WHERE key = ?", (key,)).fetchone()
            tat, wait = gcra(None if row is None else row[0], now, rate=rate, burst=burst)
            conn.execute("INSERT OR REPLACE INTO lrt_buckets (key, tat) VALUES (?, ?)", (key, tat))
            return wait

        return self._atomic(take)

    def acquire_lease(self, key: str, *, cap: int, holder: str, ttl: float) -> bool:
        def acquire(conn: sqlite3.Connection, now: float) -> bool:
            conn.execute("DELETE FROM lrt_leases WHERE key = ? AND expires_at <= ?", (key, now))
            (held,) = conn.execute(
                "SELECT count(*) FROM lrt_leases WHERE key = ?", (key,)
            ).fetchone()
            if held >= cap:
                return False
            conn.execute("INSERT INTO lrt_leases VALUES (?, ?, ?)", (key, holder, now + ttl))
            return True

        return self._atomic(acquire)

    def renew_lease(self, key: str, *, holder: str, ttl: float) -> bool:
        def renew(conn: sqlite3.Connection, now: float) -> bool:
            sql = "UPDATE lrt_leases SET expires_at = ? WHERE key = ? AND holder = ? AND expires_at > ?"
            return conn.execute(sql, (now + ttl, key, holder, now)).rowcount > 0

        return self._atomic(renew)

    def release_lease(self, key: str, *, holder: str) -> None:
        sql = "DELETE FROM lrt_leases WHERE key = ? AND holder = ?"
        self._atomic(lambda conn, now: conn.execute(sql, (key, holder)))

    def close(self) -> None:
        with self._lock:
            for conn in (self._conn, self._limits_conn):
                if conn is not None:
                    conn.close()
            self._conn = self._limits_conn = None
