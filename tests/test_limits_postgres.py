"""Limits and expiry shared across worker processes on a real PostgreSQL server.

Worker processes (multiprocessing spawn, `tests._limit_workers`) each wrap their tools on
their own ``PostgresStore`` connection to one throwaway cluster (`tests.pg`); the tools
write when each call started and ended. What the service behind a tool saw is then read
back: at most R (+ the burst) calls in any second, never more than the cap at once,
whatever the number of workers. Also: a killed worker's slot comes back within its
lease, and workers whose clocks disagree agree on when something expires.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import uuid
from typing import Any

import pytest
from langchain_core.tools import StructuredTool
from langgraph.store.postgres import PostgresStore

from langchain_resilient_tools import BreakerPolicy, ResilientTool, RetryPolicy, ToolPolicy
from langchain_resilient_tools.state.postgres import LEASES, PostgresBackend
from tests import _limit_workers
from tests._limit_workers import calls, grants, most_at_once, most_in_window

pytestmark = pytest.mark.slow  # PostgreSQL and worker processes: CI runs it on one Python

RATE, CAP = 10, 2


@pytest.fixture
def limits_db(pg_conn: Any) -> Any:
    """A connection to the session's server, the workers' tables set up afresh."""
    _limit_workers.setup(pg_conn)
    return pg_conn


def _run_workers(url: str, jobs: list[dict[str, Any]], n: int) -> None:
    """`n` workers doing `jobs`, started together; returns when all are done."""
    ctx = multiprocessing.get_context("spawn")
    together = ctx.Barrier(n)
    procs = [ctx.Process(target=_limit_workers.main, args=(url, w, jobs, together)) for w in range(n)]  # fmt: skip
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0


def test_four_workers_hold_one_rate_and_one_cap_together(pg_url: str, limits_db: Any) -> None:
    jobs = [
        {"tool": "get_quote", "calls": 10, "limits": {"rate_limit": RATE}},
        {"tool": "get_report", "calls": 4, "hold": 0.2, "limits": {"max_concurrency": CAP}},
    ]
    _run_workers(pg_url, jobs, 4)
    quotes = [s for s, _ in calls(limits_db, "get_quote")]
    assert len(quotes) == 40
    # One bucket for all: the database gave at most R + burst (1) tokens in any second.
    tokens = grants(limits_db, "get_quote")
    assert len(tokens) == 40
    assert most_in_window(tokens) <= RATE + 1, tokens
    assert tokens[-1] - tokens[0] >= (40 - 1) / RATE - 1e-6  # 40 tokens take 3.9 s, not ~1
    # The tools saw them a moment after each token: on a loaded machine that moment
    # varies by a few hundred ms, which may crowd a second (per process it would be 4 R).
    assert most_in_window(quotes) < 2 * (RATE + 1)
    reports = calls(limits_db, "get_report")
    assert len(reports) == 16
    assert most_at_once(reports) <= CAP  # four workers, each allowed 2 by itself
    assert most_at_once(reports) == CAP  # and the slots were used


def test_a_killed_workers_slot_comes_back_within_its_lease(pg_url: str, limits_db: Any) -> None:
    lease_s = 2.0
    job = {"tool": "get_report", "calls": 1, "hold": 300, "limits": {"max_concurrency": 1, "lease_s": lease_s}}  # fmt: skip
    proc = multiprocessing.get_context("spawn").Process(
        target=_limit_workers.main, args=(pg_url, 0, [job], None)
    )
    proc.start()
    backend = PostgresBackend(PostgresStore(limits_db))
    try:
        until = time.monotonic() + 120
        while backend.acquire_lease("get_report", cap=1, holder="probe", ttl=30):
            backend.release_lease("get_report", holder="probe")  # the worker has none yet
            assert time.monotonic() < until and proc.is_alive(), "the worker never took a slot"
            time.sleep(0.1)
        time.sleep(lease_s)  # it renews its lease (every third of it) while the call runs
        assert not backend.acquire_lease("get_report", cap=1, holder="probe", ttl=30)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
    killed_at = backend.now()
    row = limits_db.execute(f"SELECT holders FROM {LEASES} WHERE key = 'get_report'").fetchone()
    (expiry,) = row[0].values()
    assert killed_at < expiry <= killed_at + lease_s  # renewed until it died, then not
    assert not backend.acquire_lease("get_report", cap=1, holder="probe", ttl=30)
    time.sleep(expiry - backend.now() + 0.1)
    assert backend.acquire_lease("get_report", cap=1, holder="probe", ttl=30)


def _skewed(limits_db: Any, seconds: float) -> PostgresBackend:
    """A worker whose own clock is `seconds` off."""
    return PostgresBackend(PostgresStore(limits_db), clock=lambda: time.time() + seconds)


def test_workers_whose_clocks_disagree_agree_on_expiry(pg_url: str, limits_db: Any) -> None:
    ahead, behind = _skewed(limits_db, 40.0), _skewed(limits_db, -40.0)
    assert abs(ahead.clock() - behind.clock()) < 0.5  # both read the database's time
    key = uuid.uuid4().hex
    behind.put("t", key, "v", ttl=20)  # on its own clock this expired 20 s ago
    assert ahead.get("t", key) == "v"
    assert not ahead.claim("t", key, "w", ttl=20)  # still live for the other worker too
    assert ahead.claim("t", uuid.uuid4().hex, "x", ttl=20)


def test_a_circuit_opened_by_a_worker_whose_clock_is_behind_stays_open_for_another(
    pg_url: str, limits_db: Any
) -> None:
    """Worker A's clock is a minute behind. It opens the circuit for 30 s; without the
    database's clock, worker B would read that as long past and call the service."""
    calls: list[str] = []

    def get_quote(symbol: str) -> str:
        """The price of a stock."""
        calls.append(symbol)
        raise ConnectionError("quote service down")

    policy = ToolPolicy(
        retry=RetryPolicy(max_attempts=1),
        breaker=BreakerPolicy(failure_threshold=1, recovery_time=30),
    )
    tool = StructuredTool.from_function(get_quote)
    a = ResilientTool.wrap(tool, policy=policy, store=_skewed(limits_db, -60.0))
    b = ResilientTool.wrap(tool, policy=policy, store=_skewed(limits_db, 0.0))
    config: Any = {"configurable": {"thread_id": "t1"}}
    a.invoke(
        {"name": "get_quote", "args": {"symbol": "A"}, "id": "c1", "type": "tool_call"}, config
    )
    answer = b.invoke({"name": "get_quote", "args": {"symbol": "B"}, "id": "c2", "type": "tool_call"}, config)  # fmt: skip
    assert '"circuit_open"' in str(answer.content)
    assert calls == ["A"]  # B never called the service
