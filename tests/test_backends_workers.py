"""Shared state across worker processes (multiprocessing spawn), on every server.

Each case runs on PostgreSQL (a throwaway cluster, `tests.pg`; the adapter's store is a
``PostgresStore``) and on Redis (a throwaway server, `tests.redis_server`; the adapter's
store is a ``redis.Redis`` client); a case skips, with the reason, only when its server
cannot start. Each worker process builds its own `ResilientToolNode` on its own
connection to the server (`tests._store_workers`).
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import time
from typing import Any

import pytest

from langchain_resilient_tools.pipeline.breaker.shared import NS_BREAKER
from langchain_resilient_tools.state.choose import as_backend
from langchain_resilient_tools.testing import tool_call
from tests import _store_workers
from tests._store_workers import executions, shared_store

pytestmark = pytest.mark.slow  # servers and worker processes: CI runs it on one Python


@pytest.fixture(params=["postgres", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    """The URL of a server with nothing of ours in it (and no executions counted)."""
    if request.param == "redis":
        found: str = request.getfixturevalue("redis_url")  # emptied for the test
        return found
    pg: str = request.getfixturevalue("pg_fresh")
    return pg


def _workers(url: str, jobs: list[list[dict[str, Any]]], *, fail: bool = False, delay: float = 0.0, together: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Run each job in its own spawned process (at the same moment if `together`)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    barrier = ctx.Barrier(len(jobs)) if together else None
    procs = [
        ctx.Process(target=_store_workers.main, args=(url, calls, fail, delay, barrier, out))
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


def test_a_breaker_opened_by_one_worker_stops_another(url: str) -> None:
    calls = [tool_call("get_quote", {"symbol": s}, id=f"q{s}") for s in ("A", "B")]
    (first,) = _workers(url, [calls], fail=True)
    assert {_error(a) for a in first.values()} == {"transient_failure"}
    assert executions(url, "get_quote") == 2  # threshold 2: the circuit is open now
    (second,) = _workers(url, [[tool_call("get_quote", {"symbol": "C"}, id="qC")]], fail=True)
    assert _error(second["qC"]) == "circuit_open"
    assert executions(url, "get_quote") == 2  # the other worker never called the service


def test_a_booking_sent_to_two_workers_runs_once(url: str) -> None:
    job = [tool_call("book_room", {"room": "101"}, id="b1")]
    answers = _workers(url, [job, job], delay=0.3, together=True)
    assert executions(url, "book_room") == 1
    statuses = sorted(a["b1"]["status"] for a in answers)
    assert statuses == ["error", "success"]
    blocked = next(a["b1"] for a in answers if a["b1"]["status"] == "error")
    # The same tool call on two live workers of a graph without a checkpointer (no run
    # of it can be resumed, so the write journal keeps nothing): the dedup ledger the
    # workers share sees the identical write still running on the other and says so.
    # (With a checkpointer, the journal decides: tests/test_double_delivery.py.)
    assert _error(blocked) == "duplicate_call"
    assert "still running" in json.loads(blocked["content"])["message"]


def test_the_half_open_probe_is_admitted_once_across_workers(url: str) -> None:
    with shared_store(url) as store:
        backend = as_backend(store)
        assert backend is not None
        # An open circuit whose recovery time has passed: the next call is the probe.
        until = backend.clock() - 1
        backend.put(NS_BREAKER, "get_quote", {"until": until, "gen": "g1"}, ttl=600)
        job = [tool_call("get_quote", {"symbol": "X"}, id="p1")]
        answers = _workers(url, [job, job, job], delay=0.5, together=True)
        assert executions(url, "get_quote") == 1
        outcomes = sorted(a["p1"]["status"] for a in answers)
        assert outcomes == ["error", "error", "success"]
        assert {_error(a["p1"]) for a in answers if a["p1"]["status"] == "error"} == {"circuit_open"}  # fmt: skip
        assert backend.get(NS_BREAKER, "get_quote") is None  # the good probe closed it for all
