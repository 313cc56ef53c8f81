"""Crash-safe writes (issue 26), with real process kills: the chaos harness.

Worker processes (`tests.chaos.worker`) run an agent that sends two emails in one step,
on a durable checkpointer (SQLite always, PostgreSQL when a throwaway server starts),
with and without a store. Each test SIGKILLs a worker at one point of the step (or at a
seeded random moment, or hangs it and resumes on a second replica), resumes the thread
in a fresh process, and counts (`tests.chaos.harness.count`): emails sent per call,
calls left unanswered, silent duplicate sends, false answers, how each call was settled.

- Baselines (`ToolNode`, `ToolNode` + `ToolRetryMiddleware`): reported, not held to the
  targets; a kill between the send and its return must show the harness a duplicate.
- Our adapters (the write journal, `langchain_resilient_tools.pipeline.journal`):
  0 silent duplicates, 0 unanswered calls, 0 false answers; with ``verify=`` exactly one
  email per call.

SQLite alone plays well over 100 kills (`SQLITE_KILLS`); ``python -m bench.crash``
plays 1,000 and prints the table.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langchain_resilient_tools.state.sqlite import SqliteBackend
from tests.chaos import harness, worker
from tests.chaos.harness import Chaos, Kill, Outcome
from tests.chaos.worker import BASELINES, CONFIGS, POINTS

OURS = tuple(c for c in CONFIGS if c not in BASELINES)
KILL_POINTS = (*POINTS, "replicas")
RANDOM_KILLS = 2
"""Random-time kills per configuration and storage (seeds 0, 1, ...)."""

PG_CONFIGS = ("toolnode", "node", "node_verify", "middleware")
"""The configurations also played on PostgreSQL (fewer: a server round trip each)."""


def _plan(configs: tuple[str, ...], storages: tuple[str, ...]) -> list[Kill]:
    return harness.plan(configs, storages, KILL_POINTS, random_kills=RANDOM_KILLS)


SQLITE_KILLS = _plan(CONFIGS, ("sqlite", "sqlite_nostore"))
PG_KILLS = _plan(PG_CONFIGS, ("postgres", "postgres_nostore"))
SMOKE = ("node", "sqlite")
"""The configuration and storage whose kills run on every Python (`make suite-fast`);
the others are marked slow: CI plays them once, on one Python."""


def _params(kills: list[Kill]) -> list[Any]:
    return [
        pytest.param(k, id=k.name, marks=() if (k.config, k.storage) == SMOKE else pytest.mark.slow)
        for k in kills
    ]


@pytest.fixture(scope="module")
def chaos() -> Iterator[Chaos]:
    # Its own folder, not pytest's: the kills outlive many test sessions' clean-ups.
    with tempfile.TemporaryDirectory(prefix="lrt-chaos-") as root:
        yield Chaos(Path(root))


def play(chaos: Chaos, kill: Kill) -> Outcome:
    """One kill, with the harness's own checks (never expected to fail)."""
    outcome = chaos.run(kill)
    assert outcome.error is None, outcome.error
    if kill.point in POINTS or kill.point == "replicas":
        assert outcome.killed, f"the worker never reached {kill.point}"
    assert outcome.calls >= 2, outcome  # both emails were asked for
    return outcome


def violations(outcome: Outcome) -> list[str]:
    """The targets `outcome` misses (empty: all met)."""
    found = [
        f"{n} {what}"
        for n, what in (
            (outcome.silent_duplicates, "silent duplicate effect(s)"),
            (outcome.unanswered, "unanswered call(s)"),
            (outcome.false_answers, "false answer(s)"),
            (outcome.key_changes, "call(s) resent or looked up under another idempotency key"),
        )
        if n
    ]
    if outcome.kill.config.endswith("_verify") and set(outcome.effects.values()) != {1}:
        found.append(f"effects per call {outcome.effects}, not exactly 1 each (verify is set)")
    return found


def check_targets(outcome: Outcome) -> None:
    """The targets of issue 26: no silent duplicate, no unanswered call, no false answer."""
    missed = violations(outcome)
    assert not missed, f"{outcome.kill.name}: {missed}; settled {dict(outcome.settled)}"


def test_the_plan_is_at_least_100_kills_on_sqlite_alone() -> None:
    assert len(SQLITE_KILLS) >= 100


def test_counting_sees_silent_duplicates_and_false_answers() -> None:
    dup_call = '{"error": "duplicate_call", "message": "still running"}'
    report = {
        "messages": [
            {"type": "ai", "tool_calls": ["a", "b", "c"]},
            {"type": "tool", "tool_call_id": "a", "status": "success", "content": "sent"},
            {"type": "tool", "tool_call_id": "b", "status": "error", "content": dup_call},
        ]
    }
    outbox = [{"call_id": "a", "key": "k1"}, {"call_id": "a", "key": "k2"}, {"call_id": "c"}]
    out = harness.count(Kill("node", "sqlite", "after_effect"), True, report, outbox, [], [])
    assert out.effects == {"a": 2, "b": 0, "c": 1}
    assert (out.silent_duplicates, out.unanswered, out.false_answers) == (1, 1, 1)
    assert out.key_changes == 1  # the resend of "a" carried another key
    assert out.settled == {"ran": 1, "duplicate_call": 1, "unanswered": 1}
    # A second send a person (or a lookup that found nothing) asked for is not silent.
    allowed = harness.count(
        Kill("node_interrupt", "sqlite", "after_effect"), True, report, outbox, [],
        [{"call_id": "a", "choice": "run_again"}],
    )  # fmt: skip
    assert allowed.silent_duplicates == 0


class _SlowWrites(SqliteBackend):
    """Each statement keeps the file's write lock a while (a commit's fsync on a loaded
    disk), in a transaction of its own, as `SqliteBackend` runs it: under its lock."""

    writing = threading.Event()

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        with self._lock:
            if self._conn is None:
                self._conn = self._open()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row: tuple[Any, ...] | None = self._conn.execute(sql, params).fetchone()
            finally:
                self.writing.set()
                time.sleep(0.2)
                self._conn.execute("COMMIT")
            return row


def _hang_while_writing(path: str) -> None:
    """(In a worker process) write to `path` on a thread, as a lease keeper or another
    call's receipt may, and hang at a ``stop_`` kill point while it writes."""
    backend = _SlowWrites(path)

    def write() -> None:
        for i in range(1000):
            backend.put("ns", f"k{i % 10}", i, ttl=60)
            time.sleep(0.01)

    threading.Thread(target=write, daemon=True).start()
    _SlowWrites.writing.wait(30)
    worker._kill = "stop_here"
    worker.reach("here")


def test_a_hung_replica_never_hangs_in_the_middle_of_a_write(chaos: Chaos, tmp_path: Path) -> None:
    """A ``stop_`` point waits for the package's own SQLite writes (the journal's, the
    dedup ledger's) as for the saver's and the store's: a process stopped mid-write keeps
    the file's write lock, and every other replica's journal then waits out its deadline
    (the resume answered ``timeout`` and ran nothing)."""
    path = str(tmp_path / "store.db")
    SqliteBackend(path).put("ns", "made", 0, ttl=60)  # the table, before two processes race
    hung = chaos.ctx.Process(target=_hang_while_writing, args=(path,), daemon=True)
    hung.start()
    try:
        deadline = time.monotonic() + harness.WAIT_S
        while hung.exitcode is None and not harness._stopped(hung.pid):
            assert time.monotonic() < deadline, "the process never hung itself"
            time.sleep(0.005)
        assert hung.exitcode is None, f"it ended (exit code {hung.exitcode}) instead of hanging"
        other = sqlite3.connect(path, timeout=5, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # the file's write lock: free
            other.execute("COMMIT")
        finally:
            other.close()
    finally:
        if hung.pid is not None:
            os.kill(hung.pid, signal.SIGKILL)
        hung.join(10)


@pytest.mark.parametrize("kill", _params([k for k in SQLITE_KILLS if k.config in BASELINES]))
def test_baselines_are_reported(chaos: Chaos, kill: Kill) -> None:
    outcome = play(chaos, kill)
    if kill.point == "after_effect":  # the harness sees the duplicate the baselines send
        assert outcome.silent_duplicates >= 1, outcome


@pytest.mark.parametrize("kill", _params([k for k in SQLITE_KILLS if k.config in OURS]))
def test_our_adapters_on_sqlite(chaos: Chaos, kill: Kill) -> None:
    check_targets(play(chaos, kill))


@pytest.mark.parametrize("kill", _params(PG_KILLS))
def test_postgres(chaos: Chaos, pg_url: str, kill: Kill) -> None:
    chaos.pg_url = pg_url
    outcome = play(chaos, kill)
    if kill.config in BASELINES:
        if kill.point == "after_effect":
            assert outcome.silent_duplicates >= 1, outcome
        return
    check_targets(outcome)


def test_the_bench_plays_and_tabulates_a_few_kills() -> None:
    from bench import crash

    result = crash.run(2, configs=["toolnode"], storages=["sqlite_nostore"], postgres=False, progress=False)  # fmt: skip
    assert result["kills"] == 2 and result["postgres"].startswith("skipped")
    assert sum(r["kills"] for r in result["rows"]) == 2
    assert "effects/call" in crash.table(result)
