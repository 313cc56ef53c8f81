"""Shared state on a real PostgreSQL server: what is PostgreSQL's own.

The server is a throwaway cluster started for this session (`tests.pg`); these tests
skip, with the reason, only when it cannot start. The worker-process cases, the same on
every server, are in `test_backends_workers.py`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
import pytest
from langgraph.store.postgres import PostgresStore

from langchain_resilient_tools import Cache
from langchain_resilient_tools.state.postgres import PostgresBackend
from langchain_resilient_tools.testing import tool_call
from tests.support.graphs import tools_graph

pytestmark = pytest.mark.slow  # PostgreSQL and worker processes: CI runs it on one Python


def test_claim_is_atomic_and_ttls_hold(pg_fresh: str, pg_conn: Any) -> None:
    a, b = PostgresBackend(PostgresStore(pg_conn)), PostgresBackend(PostgresStore(pg_conn))
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


def test_an_async_graph_shares_state_through_async_postgres_store(pg_fresh: str) -> None:
    """`AsyncPostgresStore` in an async graph: what one node's call left in the store (its
    dedup entry and cached result) answers another node's identical call. (That the
    store is reached off the event loop is shown in tests/test_async_store.py.)"""
    import asyncio

    from langchain_core.messages import AIMessage
    from langgraph.store.postgres import AsyncPostgresStore

    from langchain_resilient_tools import (
        BreakerPolicy,
        ResilientToolNode,
        ToolPolicy,
    )
    from tests.tools import CALLS, ok_tool

    policy = ToolPolicy(breaker=BreakerPolicy(failure_threshold=3), cache=Cache(ttl_s=60))
    ai = AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="c1")])
    thread: Any = {"configurable": {"thread_id": "t1"}}  # no thread: nothing is shared

    def app(store: Any) -> Any:
        return tools_graph(ResilientToolNode([ok_tool()], policy=policy, store=store))

    async def main() -> list[Any]:
        answers = []
        for _ in range(2):  # two workers' nodes, each on its own store connection
            async with AsyncPostgresStore.from_conn_string(pg_fresh) as store:
                state = await app(store).ainvoke({"messages": [ai]}, thread)
                answers.append(state["messages"][-1])
        return answers

    answers = asyncio.run(main())
    assert answers[0].content == "sunny in Oslo"
    assert answers[1].response_metadata["resilience"]["served_by"] in ("dedup", "cache")
    assert CALLS["get_weather"] == 1
