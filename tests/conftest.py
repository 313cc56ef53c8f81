"""Shared fixtures: every adapter, sync and async, behind one `harness` interface.

`harness.run(tools, tool_calls, ...)` sends one AIMessage with those calls through the
adapter under test and returns the ToolMessages that answered it (by call id), the
``tool_errors`` records and the whole final state.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode

from langchain_resilient_tools import (
    ResilientTool,
    ResilientToolNode,
    ToolPolicy,
    set_testing,
)
from langchain_resilient_tools.core.policy import PolicyResolver
from langchain_resilient_tools.testing import ScriptedChatModel
from tests.support.answers import by_id
from tests.support.graphs import tools_graph

ADAPTERS = ("node", "tool", "middleware")
GRAPH_ADAPTERS = ("node", "middleware")
"""The adapters that run a whole step of the graph (a wrapped tool sees one call)."""
_LOOPS: list[asyncio.AbstractEventLoop] = []
"""Event loops made by harnesses during the current test (closed when it ends)."""
MODES = ("sync", "async")


@dataclass
class Result:
    messages: dict[str, ToolMessage]
    tool_errors: list[dict[str, Any]]
    state: dict[str, Any]

    def __getitem__(self, call_id: str) -> ToolMessage:
        return self.messages[call_id]


@dataclass
class Harness:
    adapter: str
    mode: str
    releases: list[threading.Event] = field(default_factory=list)
    adapters: list[Any] = field(default_factory=list, repr=False)
    """The adapter objects built so far (node, middleware, or each wrapped tool)."""
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    """The event loop of the async runs (made on first use, closed by `close`)."""

    def build(
        self,
        tools: Sequence[BaseTool],
        *,
        policy: ToolPolicy | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        patterns: Mapping[str, ToolPolicy] | None = None,
        checkpointer: Any = None,
        ai: AIMessage | None = None,
        script: Sequence[AIMessage] | None = None,
        store: Any = None,
        interrupt_before: Sequence[str] | None = None,
        adapter_store: Any = None,
    ) -> Any:
        """`store` becomes the graph's store (``runtime.store``), `adapter_store` the
        adapters' own ``store=``; `interrupt_before` is LangGraph's (e.g. ``["tools"]``:
        the run stops before the tools' step)."""
        self.adapters = []  # stats() reads the adapters of this build only
        if self.adapter == "middleware":
            from langchain.agents import create_agent

            from langchain_resilient_tools import ResilientToolsMiddleware

            script = list(script or [ai or AIMessage("done"), AIMessage("done")])
            return create_agent(
                ScriptedChatModel(script=script),
                tools=list(tools),
                middleware=[
                    self._keep(
                        ResilientToolsMiddleware(
                            policy=policy,
                            policies=policies,
                            patterns=patterns,
                            store=adapter_store,
                        )
                    )
                ],
                checkpointer=checkpointer,
                store=store,
                interrupt_before=interrupt_before,
            )
        if self.adapter == "node":
            node: Any = self._keep(
                ResilientToolNode(
                    tools,
                    policy=policy,
                    policies=policies,
                    patterns=patterns,
                    store=adapter_store,
                )
            )
        else:
            resolver = PolicyResolver(policy, policies, patterns)
            wrapped = [
                ResilientTool.wrap(t, policy=resolver.resolve(t.name).policy, store=adapter_store)
                for t in tools
            ]
            self.adapters.extend(wrapped)
            node = ToolNode(wrapped, handle_tool_errors=True)
        return tools_graph(
            node, checkpointer=checkpointer, store=store, interrupt_before=interrupt_before
        )

    def invoke(
        self, graph: Any, payload: Any, config: dict[str, Any] | None = None, *, control: Any = None
    ) -> Any:
        """Run `graph` once (`control`: LangGraph's `RunControl` of the run, if any)."""
        kwargs = {} if control is None else {"control": control}
        if self.mode == "sync":
            return graph.invoke(payload, config, **kwargs)
        # One loop for the harness, as an application has one: work a step leaves
        # running (ToolNode does not wait for a sibling of an interrupted call) goes on
        # between a run and its resume. Not asyncio.run, which would wait for the loop's
        # executor threads (a hung sync tool under create_agent runs on one).
        if self.loop is None or self.loop.is_closed():
            self.loop = asyncio.new_event_loop()
            _LOOPS.append(self.loop)
        return self.loop.run_until_complete(graph.ainvoke(payload, config, **kwargs))

    def close(self) -> None:
        """Release hung test tools and close the harness's event loop."""
        for event in self.releases:
            event.set()
        if self.loop is not None and not self.loop.is_closed():
            self.loop.close()

    def run(
        self,
        tools: Sequence[BaseTool],
        tool_calls: Sequence[dict[str, Any]] = (),
        *,
        invalid_tool_calls: Sequence[dict[str, Any]] = (),
        policy: ToolPolicy | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        patterns: Mapping[str, ToolPolicy] | None = None,
        config: dict[str, Any] | None = None,
        store: Any = None,
    ) -> Result:
        ai = AIMessage("", tool_calls=list(tool_calls), invalid_tool_calls=list(invalid_tool_calls))
        graph = self.build(
            tools, policy=policy, policies=policies, patterns=patterns, ai=ai, store=store
        )
        if self.adapter == "middleware":
            payload: Any = {"messages": [HumanMessage("go")]}
        else:
            payload = {"messages": [ai]}
        state = self.invoke(graph, payload, config)
        answers = by_id(state["messages"])
        return Result(answers, list(state.get("tool_errors", [])), state)

    def run_turns(
        self,
        tools: Sequence[BaseTool],
        turns: Sequence[Sequence[dict[str, Any]]],
        *,
        policy: ToolPolicy | None = None,
        policies: Mapping[str, ToolPolicy] | None = None,
        checkpointer: Any = None,
        thread_id: str = "thread-1",
        restart_at: Sequence[int] = (),
        thread_per_turn: bool = False,
        before_turn: Any = None,
    ) -> list[Result]:
        """One AIMessage of tool calls per turn, on one checkpointed thread.

        A graph object is built at turn 0 and again at each turn in `restart_at` (a
        "process restart": new adapters, same checkpointer and thread). Returns the
        result after each turn (answers accumulate over the thread).
        `thread_per_turn` runs each turn on its own thread (same adapters); `before_turn(i)`
        is called before each turn (e.g. to advance a fake clock).
        """
        from langgraph.checkpoint.memory import InMemorySaver

        saver = checkpointer if checkpointer is not None else InMemorySaver()
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        ais = [AIMessage("", tool_calls=list(calls)) for calls in turns]
        results: list[Result] = []
        graph: Any = None
        for i, ai in enumerate(ais):
            if graph is None or i in restart_at:
                script = [m for a in ais[i:] for m in (a, AIMessage("done"))]
                graph = self.build(
                    tools, policy=policy, policies=policies, checkpointer=saver, script=script
                )
            if thread_per_turn:
                config = {"configurable": {"thread_id": f"{thread_id}-{i}"}}
            if before_turn is not None:
                before_turn(i)
            if self.adapter == "middleware":
                payload: Any = {"messages": [HumanMessage(f"turn {i}")]}
            else:
                payload = {"messages": [ai]}
            state = self.invoke(graph, payload, config)
            answers = by_id(state["messages"])
            results.append(Result(answers, list(state.get("tool_errors", [])), state))
        return results

    def _keep(self, adapter: Any) -> Any:
        self.adapters.append(adapter)
        return adapter

    def stats(self) -> dict[str, dict[str, Any]]:
        """``stats().rows()`` of the adapters built last, by tool name."""
        return {row["tool"]: row for a in self.adapters for row in a.stats().rows()}

    def hang_event(self) -> threading.Event:
        """An event that hung test tools wait on; released when the test ends."""
        event = threading.Event()
        self.releases.append(event)
        return event


LONGEST_FIRST = (
    "tests/test_crash_safety.py",
    "tests/reliability/test_fault_injection.py",
    "tests/test_mcp_reference.py",
    "tests/test_backends_workers.py",
    "tests/test_backends_redis.py",
    "tests/test_backends_postgres.py",
    "tests/test_limits_postgres.py",
    "tests/test_mcp_annotations.py",
    "tests/test_mcp.py",
    "tests/test_server.py",
    "tests/test_double_delivery.py",
    "tests/test_result_scope.py",
    "tests/test_exit.py",
    "tests/test_public_api.py",
    "tests/reliability/test_leaks.py",
    "tests/test_redact.py",
    "tests/test_notebook.py",
)
"""The test files that take longest (seconds per file with ``--durations``, 3.11, two
workers), longest first. pytest-xdist hands whole files to its workers (``--dist
loadfile``) in collection order (``--no-loadscope-reorder``; its own order is most tests
first): a long file handed out last keeps one worker busy while the others wait. These
go first, then the others, most tests first. A stale entry costs time, never a test."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files in `LONGEST_FIRST` order, then most tests first (each file's tests in
    their own order)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    count = Counter(item.nodeid.split("::", 1)[0] for item in items)

    def order(item: pytest.Item) -> tuple[int, int, str]:
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank)), -count[path], path

    items.sort(key=order)


@pytest.fixture(params=[(a, m) for a in ADAPTERS for m in MODES], ids=lambda p: f"{p[0]}-{p[1]}")
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    h = Harness(*request.param)
    yield h
    h.close()


@pytest.fixture(
    params=[(a, m) for a in GRAPH_ADAPTERS for m in MODES], ids=lambda p: f"{p[0]}-{p[1]}"
)
def graph_harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """`harness` for the adapters that see the whole step (a node, the middleware): what
    a wrapped tool cannot do (interrupt, ask a person) is tested on these."""
    h = Harness(*request.param)
    yield h
    h.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """One throwaway PostgreSQL cluster for the whole session (`tests.pg`), its URL; the
    tests that need it skip, with the reason, only when it cannot start."""
    from tests import pg

    cluster = pg.start()
    if isinstance(cluster, str):
        pytest.skip(f"no PostgreSQL server: {cluster}")
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_url(postgres_server: str) -> str:
    """The session's PostgreSQL URL, with LangGraph's tables (its checkpointer's and its
    store's) set up once, and the ``executions`` table `tests._store_workers` counts in.
    What a test puts in the database is its own business (the server is shared by the
    whole session)."""
    import psycopg

    from tests.chaos.worker import setup_postgres

    setup_postgres(postgres_server)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS executions (tool text NOT NULL)")
    return postgres_server


@pytest.fixture
def pg_fresh(pg_url: str) -> str:
    """The session's PostgreSQL URL with nothing of ours in it for this test: no
    executions counted, no table of the package's (``state.backend.TABLE``)."""
    import psycopg

    from langchain_resilient_tools.state.backend import TABLE

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("TRUNCATE executions")
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    return pg_url


@pytest.fixture
def pg_conn(pg_url: str) -> Iterator[Any]:
    """A connection of this test's own to the session's PostgreSQL server, as
    LangGraph's `PostgresStore` wants it (autocommit, statements prepared at once;
    rows stay tuples); closed when the test ends."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0) as conn:
        yield conn


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """One throwaway Redis server for the whole session (`tests.redis_server`), its URL;
    the tests that need it skip, with the reason, only when it cannot start."""
    from tests import redis_server

    server = redis_server.start()
    if isinstance(server, str):
        pytest.skip(f"no Redis server: {server}")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The session's Redis URL, emptied for this test (``FLUSHALL``)."""
    import redis

    with redis.Redis.from_url(redis_server) as client:
        client.flushall()
    return redis_server


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    """A path for a SQLite checkpoints file, in the test's own folder."""
    yield str(tmp_path / "checkpoints.db")


@pytest.fixture
def saver(harness: Harness) -> Iterator[Any]:
    """Makes SQLite checkpointers on a path (e.g. `db`): `SqliteSaver`, or
    `AsyncSqliteSaver` on the async harness's loop (its connections closed when the test
    ends)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from tests.support.storage import sqlite_connect

    opened: list[Any] = []
    plain: list[Any] = []

    def make(path: str) -> Any:
        if harness.mode == "sync":
            plain.append(sqlite_connect(path))
            return SqliteSaver(plain[-1])
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        if harness.loop is None or harness.loop.is_closed():
            harness.loop = asyncio.new_event_loop()
            _LOOPS.append(harness.loop)

        async def made() -> Any:
            conn = await aiosqlite.connect(path)
            opened.append(conn)
            return AsyncSqliteSaver(conn)

        return harness.loop.run_until_complete(made())

    yield make
    for sync_conn in plain:
        sync_conn.close()
    for conn in opened:
        if harness.loop is not None and not harness.loop.is_closed():
            harness.loop.run_until_complete(conn.close())


@pytest.fixture
def sqlite_saver(db: str) -> Iterator[Any]:
    """A durable `SqliteSaver` on `db` (the journal lives in its database file), for
    graphs built without a harness; closed when the test ends."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from tests.support.storage import sqlite_connect

    conn = sqlite_connect(db)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def close_harness_loops() -> Iterator[None]:
    """Every harness keeps one event loop for its runs; close them after each test."""
    yield
    while _LOOPS:
        loop = _LOOPS.pop()
        if not loop.is_closed():
            loop.close()


@pytest.fixture(autouse=True)
def testing_mode() -> Iterator[Any]:
    """No real backoff sleeps in unit tests; the handle records the waits asked for."""
    with set_testing(True) as t:
        yield t


@pytest.fixture(autouse=True)
def reset_counts() -> Iterator[None]:
    from tests.tools import CALLS

    CALLS.clear()
    yield


# -- the reliability suite's counts, printed once at the end of the run. Under pytest-xdist
# each worker counts its own and hands them to the controller, which adds them up.


RELIABILITY_COUNTS = ("scenarios", "calls", "faults", "violations")


def _reliability_stats() -> Any:
    """`tests.reliability.invariants.STATS` if the reliability suite ran here, else None."""
    module = sys.modules.get("tests.reliability.invariants")
    return None if module is None else module.STATS


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    stats = _reliability_stats()
    if output is not None and stats is not None:  # an xdist worker
        output["reliability"] = {k: getattr(stats, k) for k in RELIABILITY_COUNTS}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    counts = getattr(node, "workeroutput", {}).get("reliability")
    if counts:
        from tests.reliability.invariants import STATS

        STATS.add(**counts)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    stats = _reliability_stats()
    if stats is not None and stats.scenarios and not hasattr(config, "workerinput"):
        terminalreporter.write_line(stats.line())
