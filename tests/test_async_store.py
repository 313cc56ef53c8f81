"""The async path never blocks the event loop on a shared store.

A LangGraph server runs many graphs on one event loop: the breaker, dedup and cache
operations of an async call reach the store off the loop, so a slow store stalls only
the call that waits for it, never the other coroutines. The same holds for the write
journal, on a store like LangGraph Server's own (`LoopStore`: LangGraph's async batching,
whose sync methods refuse to run on its event loop), also when a run is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import Op, PutOp, Result
from langgraph.store.base.batch import AsyncBatchedBaseStore
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import (
    BreakerPolicy,
    Cache,
    Fallback,
    ResilientTool,
    ResilientToolNode,
    ToolPolicy,
)
from langchain_resilient_tools.core.idempotency import derive_key
from langchain_resilient_tools.pipeline.journal.logic import entry_key
from langchain_resilient_tools.state.backend import NAMESPACE, decode
from langchain_resilient_tools.testing import tool_call
from tests.conftest import _LOOPS, Harness
from tests.rewind import rewind
from tests.support.graphs import tools_graph
from tests.tools import CALLS, ok_tool

POLICY = ToolPolicy(
    breaker=BreakerPolicy(failure_threshold=3, recovery_time=30),
    cache=Cache(ttl_s=60),
    fallback=Fallback(stale_s=600),
)


class GatedStore(InMemoryStore):
    """An in-memory store whose every operation waits until `gate` is open (a store
    that is slow until something else on the event loop has run)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.waited_in: set[str] = set()
        self.timed_out = False

    def _wait(self) -> None:
        self.waited_in.add(threading.current_thread().name)
        if not self.gate.wait(10):  # the loop was blocked: nothing could open the gate
            self.timed_out = True

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        self._wait()
        return super().batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self._wait()
        return super().batch(ops)


async def _with_opener(store: GatedStore, work: Any) -> Any:
    """Run `work` while another coroutine on the same loop opens the store's gate."""

    async def opener() -> None:
        await asyncio.sleep(0)  # runs only when the loop is free
        store.gate.set()

    result, _ = await asyncio.gather(work, opener())
    return result


def test_the_node_reaches_a_slow_store_off_the_event_loop() -> None:
    store = GatedStore()
    app = tools_graph(ResilientToolNode([ok_tool()], policy=POLICY, store=store))
    ai = AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="c1")])

    async def main() -> tuple[Any, str]:
        state = await _with_opener(store, app.ainvoke({"messages": [ai]}))
        return state, threading.current_thread().name

    state, loop_thread = asyncio.run(main())
    answer = state["messages"][-1]
    assert isinstance(answer, ToolMessage) and answer.content == "sunny in Oslo"
    assert not store.timed_out
    assert store.waited_in and loop_thread not in store.waited_in
    assert CALLS["get_weather"] == 1


def test_the_wrapper_reaches_a_slow_store_off_the_event_loop() -> None:
    store = GatedStore()
    # outside a graph (no thread) a result is shared only when it is everyone's
    policy = ToolPolicy(
        breaker=POLICY.breaker,
        cache=Cache(ttl_s=60, scope="global"),
        fallback=Fallback(stale_s=600),
    )
    tool = ResilientTool.wrap(ok_tool(), policy=policy, store=store)

    async def main() -> list[Any]:
        first = await _with_opener(store, tool.ainvoke({"city": "Oslo"}))
        again = await tool.ainvoke({"city": "Oslo"})  # a cache hit, read from the store
        return [first, again, threading.current_thread().name]

    first, again, loop_thread = asyncio.run(main())
    assert first == "sunny in Oslo" and "sunny in Oslo" in str(again)
    assert not store.timed_out
    assert store.waited_in and loop_thread not in store.waited_in
    assert CALLS["get_weather"] == 1  # the second call was answered from the store


# -- the write journal on a store like LangGraph Server's --------------------------------

JOURNAL = (NAMESPACE, "journal")


class LoopStore(AsyncBatchedBaseStore):
    """An in-memory store behind LangGraph's async batching, as LangGraph Server gives a
    graph (``runtime.store``): made on an event loop, its sync methods raise when called
    on that loop, and work from any other thread. `abandoned` is set when an intent is
    written with its lease given up (a cancelled write)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = InMemoryStore()
        self.abandoned = asyncio.Event()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            if isinstance(op, PutOp) and op.namespace == JOURNAL and op.value is not None:
                entry = decode(op.value)
                if entry["kind"] == "intent" and entry["lease_until"] == 0.0:
                    self.abandoned.set()
        return self.inner.batch(ops)


@pytest.fixture
def async_harness(harness: Harness) -> Harness:
    if harness.mode == "sync":
        pytest.skip("a loop-bound store is reached from the async path")
    return harness


@pytest.fixture
def store(async_harness: Harness) -> Iterator[LoopStore]:
    """A `LoopStore` on the loop the harness runs its graphs on (its batching task ends
    with the test, before the loop is closed)."""
    harness = async_harness
    harness.loop = loop = asyncio.new_event_loop()
    _LOOPS.append(loop)

    async def make() -> LoopStore:
        return LoopStore()

    made = loop.run_until_complete(make())
    yield made
    task = made._task
    if task is not None and not loop.is_closed():
        task.cancel()
        loop.run_until_complete(asyncio.gather(task, return_exceptions=True))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("langchain_resilient_tools")
    ]


def _entry(harness: Harness, store: LoopStore, key: str) -> Any:
    assert harness.loop is not None
    item = harness.loop.run_until_complete(store.aget(JOURNAL, key))
    return None if item is None else decode(item.value)


def _payload(harness: Harness, ai: AIMessage) -> dict[str, Any]:
    return {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}


def _journal_key(harness: Harness, graph: Any, config: dict[str, Any]) -> str:
    """The journal key of call ``c1`` of the thread's pending tools step."""
    assert harness.loop is not None
    snapshot = harness.loop.run_until_complete(graph.aget_state(config))
    assert snapshot.next == ("tools",)
    thread = config["configurable"]["thread_id"]
    step = f"tools@{snapshot.metadata['step'] + 1}"
    return entry_key("send_email", derive_key(thread, "send_email", "c1", step), step)


def test_the_journal_keeps_writes_in_a_loop_bound_store(
    async_harness: Harness, store: LoopStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A write's receipt lands in the graph's async store, and the step resumed after a
    crash is answered from it (nothing falls back, nothing runs twice)."""
    harness, sent = async_harness, []

    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c1")])
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t-async"}}

    def build() -> Any:
        tool = StructuredTool.from_function(send_email)
        return harness.build(
            [tool], checkpointer=saver, ai=ai, store=store, interrupt_before=["tools"]
        )

    graph = build()
    harness.invoke(graph, _payload(harness, ai), config)  # up to the tools' step
    key = _journal_key(harness, graph, config)
    before = saver.get_tuple(config)
    assert before is not None
    harness.invoke(graph, None, config)  # the step: the write runs
    rewind(saver, "t-async", before.config["configurable"]["checkpoint_id"])  # a crash
    state = harness.invoke(build(), None, config)  # a new worker resumes the step
    entry = _entry(harness, store, key)
    assert entry["kind"] == "receipt" and entry["content"] == "sent to ann"
    assert sent == ["ann"]
    answer = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert answer.response_metadata["resilience"]["served_by"] == "journal"
    assert _warnings(caplog) == []


def test_a_cancelled_write_is_marked_in_a_loop_bound_store(
    async_harness: Harness, store: LoopStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A run cancelled while its write runs (a client cancels it; the server shuts down)
    marks the write's intent as cut short, so that a resume settles it as unknown at
    once instead of waiting out a lease (the mark is written off the loop)."""
    harness = async_harness
    assert harness.loop is not None
    started = asyncio.Event()

    async def send_email(to: str) -> str:
        """Send an email."""
        started.set()
        await asyncio.Event().wait()  # runs until the run is cancelled
        return "never"

    tool = StructuredTool.from_function(coroutine=send_email, name="send_email")
    ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c1")])
    graph = harness.build(
        [tool], checkpointer=InMemorySaver(), ai=ai, store=store, interrupt_before=["tools"]
    )
    config = {"configurable": {"thread_id": "t-cancel"}}
    harness.invoke(graph, _payload(harness, ai), config)  # up to the tools' step
    key = _journal_key(harness, graph, config)

    async def cancel_mid_write() -> None:
        run = asyncio.ensure_future(graph.ainvoke(None, config))
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.wait_for(store.abandoned.wait(), timeout=10)

    harness.loop.run_until_complete(cancel_mid_write())
    entry = _entry(harness, store, key)
    assert entry["kind"] == "intent" and entry["lease_until"] == 0.0
    assert _warnings(caplog) == []
