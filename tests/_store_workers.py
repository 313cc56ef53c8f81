"""Worker processes for the shared-state tests: each builds its own graph on one store.

Run under ``multiprocessing`` spawn: nothing is shared with the test process but the
server at `url`: PostgreSQL (the adapter's store is a ``PostgresStore`` on a connection
of the worker's own; executions counted in the ``executions`` table) or Redis (the
adapter's store is a ``redis.Redis`` client; executions counted at ``executions:TOOL``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import redis
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.store.postgres import PostgresStore

from langchain_resilient_tools import (
    BreakerPolicy,
    ResilientToolNode,
    RetryPolicy,
    ToolPolicy,
    set_testing,
)
from tests.support.graphs import tools_graph

POLICY = ToolPolicy(
    timeout=5,
    retry=RetryPolicy(max_attempts=1),
    # Open for 10 minutes: the next worker (a spawned process, which on a loaded machine
    # took over 30 s to start) must find the circuit still open.
    breaker=BreakerPolicy(failure_threshold=2, recovery_time=600),
)


def _record(url: str, tool: str) -> None:
    if url.startswith("redis"):
        with redis.Redis.from_url(url) as client:
            client.incr(f"executions:{tool}")
        return
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO executions (tool) VALUES (%s)", (tool,))


def executions(url: str, tool: str) -> int:
    """How many times `tool` ran, in every worker on the server at `url`."""
    if url.startswith("redis"):
        with redis.Redis.from_url(url) as client:
            return int(client.get(f"executions:{tool}") or 0)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM executions WHERE tool = %s", (tool,)).fetchone()
    assert row is not None
    return int(row[0])


@contextmanager
def shared_store(url: str) -> Iterator[Any]:
    """The adapter's ``store=`` of one worker: its own connection to the server."""
    if url.startswith("redis"):
        with redis.Redis.from_url(url) as client:
            yield client
        return
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        yield PostgresStore(conn)


def _tools(url: str, fail: bool, delay: float) -> list[StructuredTool]:
    def get_quote(symbol: str) -> str:
        """The price of a stock."""
        _record(url, "get_quote")
        time.sleep(delay)
        if fail:
            raise ConnectionError("quote service down")
        return f"{symbol}: 42"

    def book_room(room: str) -> str:
        """Book a meeting room."""
        _record(url, "book_room")
        time.sleep(delay)
        return f"booked {room}"

    return [StructuredTool.from_function(f) for f in (get_quote, book_room)]


def run(url: str, calls: list[dict[str, Any]], fail: bool, delay: float, barrier: Any) -> str:
    """One worker: its own store connection, adapter and graph; answers as JSON."""
    set_testing(True)
    with shared_store(url) as store:
        node = ResilientToolNode(_tools(url, fail, delay), policy=POLICY, store=store)
        app = tools_graph(node)
        if barrier is not None:
            barrier.wait(60)
        # Both workers serve the same conversation: the ledger is scoped by its thread.
        thread = {"configurable": {"thread_id": "conversation-1"}}
        state = app.invoke({"messages": [AIMessage("", tool_calls=calls)]}, thread)
    answers = {
        m.tool_call_id: {"status": m.status, "content": m.content}
        for m in state["messages"]
        if isinstance(m, ToolMessage)
    }
    return json.dumps(answers)


def main(url: str, calls: list[dict[str, Any]], fail: bool, delay: float, barrier: Any, out: Any) -> None:  # fmt: skip
    out.put(run(url, calls, fail, delay, barrier))
