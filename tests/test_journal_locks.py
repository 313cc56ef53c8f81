"""A journal store that waits for another writer's lock: the write is still journaled.

Two processes resuming one thread together on a SQLite file meet each other's locks,
most of all at the first use of the package's table (tests/test_double_delivery.py plays
that with real processes). Here the locks are made by hand: another connection holds
the file while the switch to WAL is tried (SQLite refuses that at once), or the store
reports "database is locked" for a while; the write must be journaled, and a lock that
outlasts the deadline leaves the write not run, its outcome unknown.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from langchain_resilient_tools import Shared, Timeouts, ToolPolicy
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL
from langchain_resilient_tools.state import sqlite as sqlite_state
from langchain_resilient_tools.state.backend import BackendError
from langchain_resilient_tools.state.sqlite import SqliteBackend
from tests.conftest import Harness
from tests.test_journal import Outbox, Pending, _entries, send_tool


def _rollback_mode_file(path: str) -> sqlite3.Connection:
    """A file in SQLite's default journal mode (as a fresh ``SqliteStore`` file is), and
    a connection to it that will hold its write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("CREATE TABLE store (k TEXT)")
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    return other


def test_first_use_waits_out_another_writer_switching_the_file(tmp_path: Path) -> None:
    """Another process holds a write lock while the table is first used: SQLite refuses
    the switch to WAL at once, without waiting; it is tried again once the lock is gone."""
    path = str(tmp_path / "store.db")
    with contextlib.closing(_rollback_mode_file(path)) as other:
        other.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction
        waits: list[float] = []

        def sleep(seconds: float) -> None:  # the other writer commits meanwhile
            waits.append(seconds)
            if other.in_transaction:
                other.execute("COMMIT")

        backend = SqliteBackend(path, sleep=sleep)
        try:
            assert backend.claim(NS_JOURNAL, "k", {"n": 1}, ttl=60)
            assert not backend.claim(NS_JOURNAL, "k", {"n": 2}, ttl=60)  # one claim wins
            assert waits, "the switch to WAL was refused at first"
            with contextlib.closing(sqlite3.connect(path)) as fresh:
                assert fresh.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            backend.close()


def test_first_use_gives_up_wal_not_the_table_while_a_switch_stays_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the switch to WAL keeps being refused, the table is used in the file's own
    journal mode (atomic and durable there too), not given up."""
    path = str(tmp_path / "store.db")
    _rollback_mode_file(path).close()
    real = sqlite3.Connection.execute
    refused: list[str] = []

    class Refusing(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            if sql == "PRAGMA journal_mode=WAL":
                refused.append(sql)
                raise sqlite3.OperationalError("database is locked")
            return real(self, sql, *args)

    made = sqlite3.connect
    monkeypatch.setattr(
        sqlite_state.sqlite3, "connect", lambda *a, **k: made(*a, **k, factory=Refusing)
    )
    backend = SqliteBackend(path, sleep=lambda s: None)
    try:
        assert backend.claim(NS_JOURNAL, "k", {"n": 1}, ttl=60)
        assert backend.get(NS_JOURNAL, "k") == {"n": 1}
        assert len(refused) == len(sqlite_state.WAL_RETRIES_S) + 1
    finally:
        backend.close()


class _Locks:
    """Makes the journal's SQLite statements fail with "database is locked" (`times`
    times, or always), as a lock another process holds does."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, times: int | None) -> None:
        self.left, self.seen = times, 0
        real = SqliteBackend._run

        def run(backend: SqliteBackend, sql: str, params: tuple[Any, ...] = ()) -> Any:
            if params[:1] == (NS_JOURNAL,) and (self.left is None or self.left > 0):
                self.seen += 1
                if self.left is not None:
                    self.left -= 1
                raise sqlite3.OperationalError("database is locked")
            return real(backend, sql, params)

        monkeypatch.setattr(SqliteBackend, "_run", run)


def test_a_write_whose_intent_meets_a_lock_is_journaled_once_the_lock_is_gone(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store waits for another writer's lock while the intent is recorded: the
    intent is recorded again within the call's deadline, before ``on_backend_error``
    ("open": run the write unjournaled) applies."""
    box = Outbox()
    pending = Pending(
        harness, [send_tool(box)], saver(db), policy=ToolPolicy(timeouts=Timeouts(deadline=30))
    )
    locks = _Locks(monkeypatch, times=3)
    answer = pending.resume()
    assert answer.content == "sent to ann" and len(box.sent) == 1
    assert locks.seen == 3 and locks.left == 0
    assert _entries(db)[pending.key()]["kind"] == "receipt"  # journaled, not run bare


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_a_lock_that_outlasts_the_deadline_leaves_the_outcome_unknown(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch, on_error: str
) -> None:
    """Another writer (a hung replica) holds the journal's lock: the intent is tried again
    until the deadline, then the answer is the truth whatever ``on_error`` says (the write
    may have run before the restart; see tests/test_journal_unreadable.py), not a
    retryable timeout or store failure."""
    box = Outbox()
    policy = ToolPolicy(shared=Shared(on_error=on_error), timeouts=Timeouts(deadline=30))  # type: ignore[arg-type]
    pending = Pending(harness, [send_tool(box)], saver(db), policy=policy)
    locks = _Locks(monkeypatch, times=None)
    answer = pending.resume()
    assert answer.status == "error", answer.content
    body = json.loads(str(answer.content))
    assert body["error"] == "unknown_outcome" and body["retryable"] is False
    assert box.sent == [] and locks.seen > 1  # tried again, then not run


def test_a_lock_wait_is_told_apart_from_other_store_failures() -> None:
    from langchain_resilient_tools.state.backend import guard_store, is_lock_wait

    assert is_lock_wait(sqlite3.OperationalError("database is locked"))
    assert is_lock_wait(sqlite3.OperationalError("database table is locked"))
    assert not is_lock_wait(sqlite3.OperationalError("no such table: x"))
    assert not is_lock_wait(ConnectionError("reset"))
    with pytest.raises(BackendError) as caught, guard_store():
        raise sqlite3.OperationalError("database is locked")
    assert caught.value.lock_wait
