"""What a journaled write costs its store, through every adapter, sync and async.

A write is two store operations and no read where the store can claim atomically (a
SQLite or PostgreSQL table): the intent, committed and synced before the tool runs, and
the receipt, committed before the answer is returned but not waited on to reach the disk
(SQLite in WAL mode: ``synchronous=NORMAL`` for that statement alone). A read is none.
Through a `BaseStore` without compare-and-set (``InMemoryStore``) the claim reads first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import GetOp, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_resilient_tools import Journal, ToolPolicy
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL, Verdict, judge
from langchain_resilient_tools.runtime.lease import keeper
from langchain_resilient_tools.state import sqlite as sqlite_state
from langchain_resilient_tools.state.backend import NAMESPACE, TABLE, put_unsynced
from langchain_resilient_tools.state.inmemory import InMemoryStoreBackend
from langchain_resilient_tools.state.sqlite import FULL, NORMAL, SqliteBackend
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness

_serde = JsonPlusSerializer()


def _journal(path: str) -> dict[str, dict[str, Any]]:
    """The journal's entries in the file at `path`, as another process reads them."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        try:
            rows = conn.execute(f"SELECT key, kind, data FROM {TABLE} WHERE ns = ?", (NS_JOURNAL,))
            return {key: _serde.loads_typed((kind, bytes(data))) for key, kind, data in rows}
        except sqlite3.OperationalError:  # no table yet
            return {}


class Statements:
    """The journal's statements on SQLite, each with the ``synchronous`` level it ran at."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, int]] = []
        real = SqliteBackend._run

        def run(backend: SqliteBackend, sql: str, params: tuple[Any, ...] = ()) -> Any:
            row = real(backend, sql, params)
            if params[:1] == (NS_JOURNAL,):
                assert backend._conn is not None
                level = backend._conn.execute("PRAGMA synchronous").fetchone()[0]
                self.seen.append((sql.split()[0], level))
            return row

        monkeypatch.setattr(SqliteBackend, "_run", run)


def _graph_run(harness: Harness, tool: BaseTool, store: Any, call_id: str) -> ToolMessage:
    """One run of a checkpointed graph whose step calls `tool` once, with `store`."""
    ai = AIMessage("", tool_calls=[tool_call(tool.name, {"to": "ann"}, id=call_id)])
    graph = harness.build([tool], checkpointer=InMemorySaver(), ai=ai, store=store)
    payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
    state = harness.invoke(graph, payload, {"configurable": {"thread_id": call_id}})
    return next(
        m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    )


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[tuple[SqliteStore, str]]:
    path = str(tmp_path / "store.db")
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    yield SqliteStore(conn), path
    conn.close()


def test_a_write_is_two_statements_its_intent_synced_before_the_tool_runs(
    harness: Harness, sqlite_store: tuple[SqliteStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = sqlite_store
    statements = Statements(monkeypatch)
    seen_by_tool: list[tuple[dict[str, Any], list[tuple[str, int]]]] = []

    def send_email(to: str) -> str:
        """Send an email."""
        seen_by_tool.append((_journal(path), list(statements.seen)))
        return f"sent to {to}"

    answer = _graph_run(harness, StructuredTool.from_function(send_email), store, "c1")
    assert answer.content == "sent to ann"
    # Before the tool ran: one statement, synced, and the intent committed (read by
    # another connection, as a resume in another process reads it).
    [(before, so_far)] = seen_by_tool
    assert so_far == [("INSERT", FULL)]
    assert [e["kind"] for e in before.values()] == ["intent"]
    # Before the answer: the receipt committed, without a second sync (WAL mode).
    assert statements.seen == [("INSERT", FULL), ("INSERT", NORMAL)]
    assert [e["kind"] for e in _journal(path).values()] == ["receipt"]


def test_a_read_costs_the_journal_nothing(
    harness: Harness, sqlite_store: tuple[SqliteStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = sqlite_store
    statements = Statements(monkeypatch)

    def get_inbox(to: str) -> str:
        """Read an inbox."""
        return f"inbox of {to}"

    answer = _graph_run(harness, StructuredTool.from_function(get_inbox), store, "r1")
    assert answer.content == "inbox of ann"
    assert statements.seen == [] and _journal(path) == {}


class CountingStore(InMemoryStore):
    """An ``InMemoryStore`` that counts the reads and writes of the journal's namespace."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = self.writes = 0

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            if getattr(op, "namespace", None) == (NAMESPACE, NS_JOURNAL):
                self.reads += isinstance(op, GetOp)
                self.writes += isinstance(op, PutOp)
        return super().batch(ops)


def test_a_store_without_compare_and_set_reads_once_before_the_intent(harness: Harness) -> None:
    """``InMemoryStore`` (any `BaseStore`): the claim reads, then puts; the receipt puts."""
    store = CountingStore()

    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    answer = _graph_run(harness, StructuredTool.from_function(send_email), store, "c1")
    assert answer.content == "sent to ann"
    assert (store.reads, store.writes) == (1, 2)


def test_a_write_unjournaled_costs_the_store_nothing(harness: Harness) -> None:
    store = CountingStore()

    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    tool = StructuredTool.from_function(send_email)
    ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c1")])
    graph = harness.build(
        [tool], policy=ToolPolicy(journal=False), checkpointer=InMemorySaver(), ai=ai, store=store
    )
    payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
    harness.invoke(graph, payload, {"configurable": {"thread_id": "c1"}})
    assert (store.reads, store.writes) == (0, 0)


# -- the backends' unsynced put ------------------------------------------------------------

_KILLED_AFTER_PUT = """
import os, signal, sys
from langchain_resilient_tools.state.sqlite import SqliteBackend
backend = SqliteBackend(sys.argv[1])
backend.claim("journal", "k", {"kind": "intent"}, ttl=600)
backend.put_unsynced("journal", "k", {"kind": "receipt"}, ttl=600)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_unsynced_sqlite_put_outlives_the_process_that_made_it(tmp_path: Path) -> None:
    """Committed without a sync: the commit is the operating system's once it returns,
    so a SIGKILL right after it loses nothing (a power loss might)."""
    path = str(tmp_path / "j.db")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_PUT, path], env=env, check=False)
    assert done.returncode == -signal.SIGKILL
    assert SqliteBackend(path).get("journal", "k") == {"kind": "receipt"}


def test_an_unsynced_put_syncs_outside_wal_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In SQLite's rollback journal, ``synchronous=NORMAL`` may corrupt the file on a
    power loss: there every statement stays synced."""
    monkeypatch.setattr(sqlite_state, "_use_wal", lambda conn, sleep: None)
    path = str(tmp_path / "rollback.db")
    backend = SqliteBackend(path)
    levels: list[int] = []
    real = SqliteBackend._run

    def run(self: SqliteBackend, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = real(self, sql, params)
        assert self._conn is not None
        levels.append(self._conn.execute("PRAGMA synchronous").fetchone()[0])
        return row

    monkeypatch.setattr(SqliteBackend, "_run", run)
    put_unsynced(backend, "ns", "k", 1, ttl=60)
    assert backend.get("ns", "k") == 1
    assert levels == [FULL, FULL]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_backend_without_an_unsynced_put_puts() -> None:
    from langchain_resilient_tools.state.backend import MemoryBackend

    backend = MemoryBackend()
    put_unsynced(backend, "ns", "k", {"a": 1}, ttl=60)
    assert backend.get("ns", "k") == {"a": 1}


@pytest.mark.slow
def test_an_unsynced_postgres_put_is_committed_and_leaves_the_session_as_it_was(
    pg_url: str,
) -> None:
    import psycopg

    from langchain_resilient_tools.state.postgres import PostgresBackend

    with psycopg.connect(pg_url, autocommit=True) as conn, psycopg.connect(pg_url) as other:
        backend = PostgresBackend(type("Store", (), {"conn": conn})())
        backend.put_unsynced("ns_unsynced", "k", {"kind": "receipt"}, ttl=60)
        backend.put_unsynced("ns_unsynced", "k", {"kind": "receipt", "n": 2}, ttl=60)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        other_backend = PostgresBackend(type("Store", (), {"conn": other})())
        assert other_backend.get("ns_unsynced", "k") == {"kind": "receipt", "n": 2}


def test_an_in_memory_store_is_used_in_place_on_the_event_loop(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its operations take microseconds and do no I/O: no hop to a worker thread and
    back (a store bound to a loop, or a database, is still left off the loop)."""
    if harness.mode != "async":
        pytest.skip("the async path")
    threads: list[str] = []
    real_get, real_put = InMemoryStoreBackend._get, InMemoryStoreBackend._put

    def get(self: InMemoryStoreBackend, ns: str, key: str) -> Any:
        threads.append(threading.current_thread().name)
        return real_get(self, ns, key)

    def put(self: InMemoryStoreBackend, ns: str, key: str, value: Any, ttl: float) -> None:
        threads.append(threading.current_thread().name)
        real_put(self, ns, key, value, ttl)

    monkeypatch.setattr(InMemoryStoreBackend, "_get", get)
    monkeypatch.setattr(InMemoryStoreBackend, "_put", put)

    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    store = InMemoryStore()
    answer = _graph_run(harness, StructuredTool.from_function(send_email), store, "c1")
    assert answer.content == "sent to ann"
    [receipt] = store.search((NAMESPACE, NS_JOURNAL))  # in the store, as its API reads it
    assert receipt.value["j"]["kind"] == "receipt"
    assert threads == [threading.current_thread().name] * 3  # read, intent, receipt


def test_a_write_in_process_memory_holds_its_lease_without_the_keeper(
    harness: Harness, sqlite_store: tuple[SqliteStore, str]
) -> None:
    """An ``InMemoryStore`` is read by this process alone: the intent holds its lease
    for as long as the entry is kept (a twin of the write in this process finds it
    running however long it runs) and the lease keeper renews nothing. A store another
    worker reads (a SQLite file) gets a lease of `Journal.lease_s`, renewed while the
    write runs."""
    store, path = InMemoryStore(), sqlite_store[1]
    seen: list[tuple[dict[str, Any], int]] = []
    held = len(keeper)

    def in_memory() -> list[dict[str, Any]]:
        return [item.value["j"] for item in store.search((NAMESPACE, NS_JOURNAL))]

    def send_email(to: str) -> str:
        """Send an email."""
        [entry] = in_memory() if len(seen) == 0 else list(_journal(path).values())
        seen.append((entry, len(keeper) - held))
        return f"sent to {to}"

    tool = StructuredTool.from_function(send_email)
    assert _graph_run(harness, tool, store, "c1").content == "sent to ann"
    assert _graph_run(harness, tool, sqlite_store[0], "c2").content == "sent to ann"
    (memory, renewed_there), (sqlite, renewed_here) = seen
    journal = Journal()
    assert memory["lease_until"] == memory["started"] + journal.ttl_s and renewed_there == 0
    much_later = memory["started"] + 100 * journal.lease_s
    assert judge(memory, much_later, memory["args"]) is Verdict.RUNNING
    assert sqlite["lease_until"] == sqlite["started"] + journal.lease_s and renewed_here == 1
    assert len(keeper) == held
