"""Shared state on a real PostgreSQL server, across worker processes (multiprocessing spawn).

The server is a throwaway cluster started for this session (`tests.pg`); these tests
skip, with the reason, only when it cannot start. Each worker process builds its own
`ResilientToolNode` on its own ``PostgresStore`` connection to the same database.
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.store.postgres import PostgresStore

from langchain_resilient_tools import Cache
from langchain_resilient_tools.pipeline.breaker.shared import NS_BREAKER
from langchain_resilient_tools.state.backend import TABLE
from langchain_resilient_tools.state.choose import as_backend
from langchain_resilient_tools.state.postgres import PostgresBackend
from langchain_resilient_tools.testing import tool_call
from tests import _pg_workers

pytestmark = pytest.mark.slow  # PostgreSQL and worker processes: CI runs it on one Python


@pytest.fixture
def db(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("TRUNCATE executions")
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        yield conn


def _executions(db: psycopg.Connection[Any], tool: str) -> int:
    row = db.execute("SELECT count(*) FROM executions WHERE tool = %s", (tool,)).fetchone()
    assert row is not None
    return int(row[0])


def _workers(url: str, jobs: list[list[dict[str, Any]]], *, fail: bool = False, delay: float = 0.0, together: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Run each job in its own spawned process (at the same moment if `together`)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    barrier = ctx.Barrier(len(jobs)) if together else None
    procs = [
        ctx.Process(target=_pg_workers.main, args=(url, calls, fail, delay, barrier, out))
        for calls in jobs
    ]
    for p in procs:
        p.start()
    answers: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    while len(answers) < len(procs):
        try:
            answers.append(json.loads(out.get(timeout=0.5)))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead and time.monotonic() < deadline, f"a worker failed: {dead}"
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return answers


def _error(answer: dict[str, Any]) -> str:
    assert answer["status"] == "error", answer
    error: str = json.loads(answer["content"])["error"]
    return error


def test_a_breaker_opened_by_one_worker_stops_another(pg_url: str, db: Any) -> None:
    calls = [tool_call("get_quote", {"symbol": s}, id=f"q{s}") for s in ("A", "B")]
    (first,) = _workers(pg_url, [calls], fail=True)
    assert {_error(a) for a in first.values()} == {"transient_failure"}
    assert _executions(db, "get_quote") == 2  # threshold 2: the circuit is open now
    (second,) = _workers(pg_url, [[tool_call("get_quote", {"symbol": "C"}, id="qC")]], fail=True)
    assert _error(second["qC"]) == "circuit_open"
    assert _executions(db, "get_quote") == 2  # the other worker never called the service


def test_a_booking_sent_to_two_workers_runs_once(pg_url: str, db: Any) -> None:
    job = [tool_call("book_room", {"room": "101"}, id="b1")]
    answers = _workers(pg_url, [job, job], delay=0.3, together=True)
    assert _executions(db, "book_room") == 1
    statuses = sorted(a["b1"]["status"] for a in answers)
    assert statuses == ["error", "success"]
    blocked = next(a["b1"] for a in answers if a["b1"]["status"] == "error")
    # The same tool call on two live workers of a graph without a checkpointer (no run
    # of it can be resumed, so the write journal keeps nothing): the dedup ledger the
    # workers share sees the identical write still running on the other and says so.
    # (With a checkpointer, the journal decides: tests/test_double_delivery.py.)
    assert _error(blocked) == "duplicate_call"
    assert "still running" in json.loads(blocked["content"])["message"]


def test_the_half_open_probe_is_admitted_once_across_workers(pg_url: str, db: Any) -> None:
    backend = as_backend(PostgresStore(db))
    assert isinstance(backend, PostgresBackend)
    # An open circuit whose recovery time has passed: the next call is the probe.
    backend.put(NS_BREAKER, "get_quote", {"until": time.time() - 1, "gen": "g1"}, ttl=60)
    job = [tool_call("get_quote", {"symbol": "X"}, id="p1")]
    answers = _workers(pg_url, [job, job, job], delay=0.5, together=True)
    assert _executions(db, "get_quote") == 1
    outcomes = sorted(a["p1"]["status"] for a in answers)
    assert outcomes == ["error", "error", "success"]
    assert {_error(a["p1"]) for a in answers if a["p1"]["status"] == "error"} == {"circuit_open"}
    assert backend.get(NS_BREAKER, "get_quote") is None  # the good probe closed it for all


def test_claim_is_atomic_and_ttls_hold(pg_url: str, db: Any) -> None:
    a, b = PostgresBackend(PostgresStore(db)), PostgresBackend(PostgresStore(db))
    key = uuid.uuid4().hex
    assert a.claim("t", key, "a", ttl=0.3) is True
    assert b.claim("t", key, "b", ttl=0.3) is False
    assert b.get("t", key) == "a"
    time.sleep(0.4)  # a real TTL, only here: the server's rows must expire for real
    assert a.get("t", key) is None
    assert b.claim("t", key, "b", ttl=0.3) is True
    b.put("t", key, {"n": 1}, ttl=30)
    assert a.get("t", key) == {"n": 1}
    a.delete("t", key)
    assert b.get("t", key) is None


def test_an_unreachable_server_is_a_backend_error(pg_url: str) -> None:
    from langchain_resilient_tools.core.errors import BackendError

    conn = psycopg.connect(pg_url, autocommit=True)
    backend = PostgresBackend(PostgresStore(conn))
    backend.setup()
    conn.close()  # the connection is gone, as in a partition
    with pytest.raises(BackendError):
        backend.get("t", "k")


def test_an_async_graph_shares_state_through_async_postgres_store(pg_url: str, db: Any) -> None:
    """`AsyncPostgresStore` in an async graph: what one node's call left in the store (its
    dedup entry and cached result) answers another node's identical call. (That the
    store is reached off the event loop is shown in tests/test_async_store.py.)"""
    import asyncio

    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.postgres import AsyncPostgresStore

    from langchain_resilient_tools import (
        BreakerPolicy,
        ResilientToolNode,
        ResilientToolsState,
        ToolPolicy,
    )
    from tests.tools import CALLS, ok_tool

    policy = ToolPolicy(breaker=BreakerPolicy(failure_threshold=3), cache=Cache(ttl_s=60))
    ai = AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="c1")])
    thread: Any = {"configurable": {"thread_id": "t1"}}  # no thread: nothing is shared

    def app(store: Any) -> Any:
        graph = StateGraph(ResilientToolsState)
        graph.add_node("tools", ResilientToolNode([ok_tool()], policy=policy, store=store))
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        return graph.compile()

    async def main() -> list[Any]:
        answers = []
        for _ in range(2):  # two workers' nodes, each on its own store connection
            async with AsyncPostgresStore.from_conn_string(pg_url) as store:
                state = await app(store).ainvoke({"messages": [ai]}, thread)
                answers.append(state["messages"][-1])
        return answers

    answers = asyncio.run(main())
    assert answers[0].content == "sunny in Oslo"
    assert answers[1].response_metadata["resilience"]["served_by"] in ("dedup", "cache")
    assert CALLS["get_weather"] == 1
