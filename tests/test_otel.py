"""OpenTelemetry export, checked with the SDK's in-memory metric reader and span exporter:
metrics, and spans after the GenAI semantic conventions (``execute_tool {tool}``, one child
span per attempt), through every adapter, sync and async."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langchain_resilient_tools import BreakerPolicy, Cache, Hedge, RetryPolicy, ToolPolicy
from langchain_resilient_tools.pipeline.hedge.stage import HedgeStage
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import counted, failing_tool, flaky_tool, ok_tool

ROOT = Path(__file__).parent.parent
_READER = InMemoryMetricReader()
_SPANS = InMemorySpanExporter()


@pytest.fixture(scope="module")
def otel() -> Iterator[None]:
    # The global providers can be set once per process; this module sets them, or, when
    # code run earlier in the process set a tracer provider, adds its exporter to it.
    metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(SimpleSpanProcessor(_SPANS))
    else:
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(_SPANS))
        trace.set_tracer_provider(tracer_provider)
    yield


@pytest.fixture
def spans(otel: None) -> Iterator[InMemorySpanExporter]:
    _SPANS.clear()
    yield _SPANS
    _SPANS.clear()


def points(name: str, tool: str, key: str = "tool") -> list[Any]:
    """Data points of metric `name` whose `key` attribute is `tool`."""
    data = _READER.get_metrics_data()
    found = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found += [p for p in metric.data.data_points if p.attributes.get(key) == tool]
    return found


def call_span(spans: InMemorySpanExporter, call_id: str) -> ReadableSpan:
    [span] = [
        s
        for s in spans.get_finished_spans()
        if s.name.startswith("execute_tool ") and s.attributes.get("gen_ai.tool.call.id") == call_id
    ]
    return span


def children(spans: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    """The finished spans whose parent is `parent`, in the order they started."""
    found = [
        s
        for s in spans.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    return sorted(found, key=lambda s: s.start_time or 0)


def unique(harness: Harness, name: str) -> str:
    """Tool names unique per parametrisation: cumulative metrics do not mix runs."""
    return f"{name}_{harness.adapter}_{harness.mode}"


def test_calls_durations_and_retries_are_exported(
    harness: Harness, spans: InMemorySpanExporter
) -> None:
    search, order = unique(harness, "search"), unique(harness, "get_order")
    tools = [flaky_tool(search, failures=2), failing_tool(order, ValueError("bad id"))]
    harness.run(
        tools,
        [tool_call(search, {"query": "q"}, id="c1"), tool_call(order, {"query": "1"}, id="c2")],
    )
    calls = {p.attributes["status"]: p.value for p in points("tool_call_total", search)}
    assert calls == {"success": 1}
    calls = {p.attributes["status"]: p.value for p in points("tool_call_total", order)}
    assert calls == {"tool_error": 1}
    [duration] = points("tool_call_duration", search)
    assert duration.count == 1 and 0 <= duration.sum < 5
    [retries] = points("tool_call_retries_total", search)
    assert retries.value == 2
    assert points("tool_call_retries_total", order) == []
    # The GenAI conventions' own duration metric, beside ours.
    [genai] = points("gen_ai.execute_tool.duration", order, key="gen_ai.tool.name")
    assert genai.count == 1
    assert genai.attributes["gen_ai.operation.name"] == "execute_tool"
    assert genai.attributes["error.type"] == "tool_error"
    [genai] = points("gen_ai.execute_tool.duration", search, key="gen_ai.tool.name")
    assert "error.type" not in genai.attributes

    span = call_span(spans, "c1")
    assert span.name == f"execute_tool {search}"
    assert span.attributes["lrt.attempts"] == 3 and span.attributes["lrt.retries"] == 2
    assert span.attributes["lrt.outcome"] == "success"
    assert "error.type" not in span.attributes
    assert span.status.status_code == trace.StatusCode.UNSET
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time >= span.start_time
    failed = call_span(spans, "c2")
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.status.status_code == trace.StatusCode.ERROR


def test_a_call_span_follows_the_genai_conventions(
    harness: Harness, spans: InMemorySpanExporter
) -> None:
    name = unique(harness, "get_weather")
    harness.run([ok_tool(name)], [tool_call(name, {"city": "Paris"}, id="call_7")])
    span = call_span(spans, "call_7")
    assert span.name == f"execute_tool {name}"
    assert span.kind == trace.SpanKind.INTERNAL
    attrs = dict(span.attributes or {})
    assert {k: v for k, v in attrs.items() if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": "call_7",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": f"The {name} tool.",
    }
    assert attrs["lrt.served_by"] == "tool" and attrs["lrt.attempts"] == 1
    assert (attrs["lrt.classified_as"], attrs["lrt.classified_by"]) == ("read", "name")
    [attempt] = children(spans, span)
    assert attempt.name == f"attempt {name}"
    assert attempt.attributes == {"lrt.attempt.number": 1, "lrt.attempt.outcome": "success"}


def test_each_attempt_is_a_child_span(harness: Harness, spans: InMemorySpanExporter) -> None:
    """A call that retried once: two attempt spans under the call's span, the first
    failed with the envelope's error type and the exception's type, never its text."""
    name = unique(harness, "search_docs")
    harness.run([flaky_tool(name, failures=1)], [tool_call(name, {"query": "q"}, id="c1")])
    span = call_span(spans, "c1")
    first, second = children(spans, span)
    assert first.attributes == {
        "lrt.attempt.number": 1,
        "lrt.attempt.outcome": "error",
        "lrt.attempt.exception": "ConnectionError",
        "error.type": "transient_failure",
    }
    assert first.status.status_code == trace.StatusCode.ERROR
    assert second.attributes == {"lrt.attempt.number": 2, "lrt.attempt.outcome": "success"}
    assert first.end_time is not None and second.start_time is not None
    assert first.end_time <= second.start_time  # one after the other: a retry, not a hedge
    everything = repr([(s.attributes, s.status.description) for s in spans.get_finished_spans()])
    assert "sk-live" not in everything and "service unavailable" not in everything


def test_the_tools_own_spans_are_children_of_its_attempt(
    harness: Harness, spans: InMemorySpanExporter
) -> None:
    """The call's span is current while it runs, on whatever thread or task runs the tool:
    a span the tool makes (an HTTP client's, an MCP client's) hangs under the attempt."""
    name = unique(harness, "get_page")
    tracer = trace.get_tracer("a-tool")

    def get_page(url: str) -> str:
        with tracer.start_as_current_span("GET"):
            return "<html>"

    async def aget_page(url: str) -> str:
        with tracer.start_as_current_span("GET"):
            await asyncio.sleep(0)
            return "<html>"

    tools = [counted(name, get_page), counted(f"{name}_async", get_page, coroutine=aget_page)]
    calls = [tool_call(t.name, {"url": "https://x"}, id=t.name) for t in tools]
    harness.run(tools, calls)
    for tool in tools:
        span = call_span(spans, tool.name)
        [attempt] = children(spans, span)
        [inner] = children(spans, attempt)
        assert inner.name == "GET"
        assert inner.context.trace_id == span.context.trace_id


def test_an_enclosing_span_is_the_parent(harness: Harness, spans: InMemorySpanExporter) -> None:
    name = unique(harness, "get_time")
    with trace.get_tracer("app").start_as_current_span("invoke_agent") as outer:
        harness.run([ok_tool(name)], [tool_call(name, {"city": "Oslo"}, id="c1")])
    span = call_span(spans, "c1")
    assert span.parent is not None and span.parent.span_id == outer.get_span_context().span_id


def test_what_answered_and_the_breaker_are_attributes(
    harness: Harness, spans: InMemorySpanExporter
) -> None:
    name = unique(harness, "get_feed")
    policy = ToolPolicy(
        retry=RetryPolicy(max_attempts=1),
        breaker=BreakerPolicy(failure_threshold=1, recovery_time=60),
        fallback={"items": []},
    )
    harness.run(
        [failing_tool(name, ConnectionError("down"))],
        [tool_call(name, {"query": "a"}, id="c1")],
        policy=policy,
    )
    span = call_span(spans, "c1")
    assert span.attributes["lrt.served_by"] == "fallback"
    assert span.attributes["lrt.breaker.state"] == "open"
    assert span.attributes["lrt.outcome"] == "success" and "error.type" not in span.attributes


def test_a_cached_answer_has_no_attempt(harness: Harness, spans: InMemorySpanExporter) -> None:
    name = unique(harness, "get_rate")
    policy = ToolPolicy(cache=Cache(ttl_s=60), dedup="off")
    turns = [[tool_call(name, {"city": "Rome"}, id=f"c{i}")] for i in (1, 2)]
    harness.run_turns([ok_tool(name)], turns, policy=policy)
    span = call_span(spans, "c2")
    assert span.attributes["lrt.served_by"] == "cache"
    assert span.attributes["lrt.attempts"] == 0
    assert children(spans, span) == []
    assert len(children(spans, call_span(spans, "c1"))) == 1


def test_repairs_are_listed(harness: Harness, spans: InMemorySpanExporter) -> None:
    name = unique(harness, "get_city_weather")
    harness.run(
        [ok_tool(name)],
        [tool_call(name, {"town": "Lima"}, id="c1")],
        policy=ToolPolicy(aliases={"city": ["town"]}),
    )
    span = call_span(spans, "c1")
    repairs = span.attributes["lrt.repairs"]
    assert isinstance(repairs, Sequence) and len(repairs) == 1 and "city" in repairs[0]


def test_an_interrupt_ends_the_span_without_an_error(
    harness: Harness, spans: InMemorySpanExporter
) -> None:
    name = unique(harness, "get_approval")

    def get_approval(amount: int) -> str:
        """Ask a person."""
        return str(interrupt({"approve": amount}))

    tool = StructuredTool.from_function(get_approval, name=name)
    ai = AIMessage("", tool_calls=[tool_call(name, {"amount": 3}, id="ask")])
    graph = harness.build([tool], checkpointer=InMemorySaver(), ai=ai)
    config = {"configurable": {"thread_id": f"otel-{name}"}}
    payload = {"messages": [HumanMessage("go")] if harness.adapter == "middleware" else [ai]}
    paused = harness.invoke(graph, payload, config)
    assert "__interrupt__" in paused
    first = call_span(spans, "ask")
    assert first.attributes["lrt.outcome"] == "interrupted"
    assert first.status.status_code == trace.StatusCode.UNSET
    [attempt] = children(spans, first)
    assert attempt.attributes["lrt.attempt.outcome"] == "interrupted"
    spans.clear()
    harness.invoke(graph, Command(resume="yes"), config)
    assert call_span(spans, "ask").attributes["lrt.outcome"] == "success"


# -- hedged reads: attempts that overlap --------------------------------------------------


class _Stall:
    """The first execution of a query moves the fake clock past the hedge delay and
    waits (sync) or hangs until cancelled (async); any other answers at once."""

    def __init__(self, harness: Harness, clock: FakeClock) -> None:
        self.clock = clock
        self.release = harness.hang_event()
        self.done = threading.Event()
        self.seen: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()

    def first(self, query: str) -> bool:
        with self.lock:
            self.seen[query] += 1
            return self.seen[query] == 1

    def read(self, query: str) -> str:
        if self.first(query):
            self.clock.advance(10.0)
            self.release.wait(30)
            return f"late {query}"
        return f"fresh {query}"

    async def aread(self, query: str) -> str:
        if self.first(query):
            self.clock.advance(10.0)
            await asyncio.get_running_loop().create_future()  # until cancelled
        return f"fresh {query}"


def test_a_hedged_call_shows_its_overlapping_attempts(
    harness: Harness, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    stall = _Stall(harness, clock)
    name = unique(harness, "search_docs")
    may_hedge = HedgeStage._may_hedge

    def spy(self: HedgeStage, call: Any) -> bool:
        ok = may_hedge(self, call)
        if not ok:
            stall.release.set()
        return ok

    monkeypatch.setattr(HedgeStage, "_may_hedge", spy)
    tool = counted(name, stall.read, coroutine=stall.aread)
    hedge = Hedge(delay=0.5, budget=1.0)  # a token with the first call: its budget starts empty
    policy = ToolPolicy(hedge=hedge, clock=clock, dedup="off")
    result = harness.run([tool], [tool_call(name, {"query": "q"}, id="c1")], policy=policy)
    assert result["c1"].content == "fresh q"
    stall.release.set()  # a sync loser runs out now
    span = call_span(spans, "c1")
    assert span.attributes["lrt.hedges.sent"] == 1
    assert span.attributes["lrt.hedges.winner"] == 1  # the hedge answered
    assert span.attributes["lrt.attempts"] == 2 and span.attributes["lrt.retries"] == 0
    hedges = [s for s in children(spans, span) if s.attributes.get("lrt.attempt.hedge") == 1]
    [hedge] = hedges
    assert hedge.attributes["lrt.attempt.outcome"] == "success"
    if harness.mode == "async":  # the loser was cancelled, and its span says so
        [loser] = [s for s in children(spans, span) if "lrt.attempt.hedge" not in s.attributes]
        assert loser.attributes["lrt.attempt.outcome"] == "cancelled"
        assert loser.status.status_code == trace.StatusCode.UNSET
        assert loser.start_time is not None and hedge.start_time is not None
        assert loser.end_time is not None and hedge.end_time is not None
        assert loser.start_time < hedge.start_time < loser.end_time  # they overlapped


# -- the rendered trace of docs/observability.md ------------------------------------------

DOC = ROOT / "docs" / "observability.md"


def test_the_documented_trace_is_what_the_example_prints() -> None:
    """The example of docs/observability.md runs in a fresh interpreter (the global
    tracer provider can be set once per process) and prints the trace shown below it."""
    text = DOC.read_text()
    match = re.search(r"```python\n(.*?)```\n.*?```text\n(.*?)```", text, flags=re.S)
    assert match, "docs/observability.md: the example and its output"
    code, shown = match.groups()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == shown.strip()
