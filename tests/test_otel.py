"""OpenTelemetry export, checked with the SDK's in-memory metric reader and span exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langchain_resilient_tools import BreakerPolicy, RetryPolicy, ToolPolicy
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.tools import failing_tool, flaky_tool, ok_tool

_READER = InMemoryMetricReader()
_SPANS = InMemorySpanExporter()


@pytest.fixture(scope="module")
def otel() -> Iterator[None]:
    # The global providers can be set once per process; this module owns them.
    metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(_SPANS))
    trace.set_tracer_provider(tracer_provider)
    yield


def points(name: str, tool: str) -> list[Any]:
    """Data points of metric `name` whose ``tool`` attribute is `tool`."""
    data = _READER.get_metrics_data()
    found = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found += [p for p in metric.data.data_points if p.attributes["tool"] == tool]
    return found


def test_calls_durations_and_retries_are_exported(harness: Harness, otel: None) -> None:
    # Tool names are unique per parametrisation: cumulative metrics do not mix runs.
    suffix = f"{harness.adapter}_{harness.mode}"
    search, order = f"search_{suffix}", f"get_order_{suffix}"
    tools = [flaky_tool(search, failures=2), failing_tool(order, ValueError("bad id"))]
    _SPANS.clear()
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

    spans = {s.name: s for s in _SPANS.get_finished_spans()}
    span = spans[f"tool_call {search}"]
    assert span.attributes["resilience.attempts"] == 3
    assert span.attributes["status"] == "success"
    assert span.end_time >= span.start_time
    failed = spans[f"tool_call {order}"]
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.status.status_code == trace.StatusCode.ERROR


def test_breaker_state_and_opens(harness: Harness, otel: None) -> None:
    name = f"get_feed_{harness.adapter}_{harness.mode}"
    policy = ToolPolicy(
        retry=RetryPolicy(max_attempts=1),
        breaker=BreakerPolicy(failure_threshold=2, recovery_time=60),
    )
    calls = [tool_call(name, {"query": str(i)}, id=f"c{i}") for i in range(3)]
    result = harness.run([failing_tool(name, ConnectionError("down"))], calls, policy=policy)
    errors = sorted(result[f"c{i}"].status for i in range(3))
    assert errors == ["error"] * 3
    row = harness.stats()[name]
    assert row["breaker"] == "open"
    assert row["breaker_opens"] == 1
    # Async calls run together and may all reach the tool; sync ones meet the open circuit.
    assert sum(row["errors_by_type"].values()) == 3
    [state] = points("tool_breaker_state", name)
    assert state.value == 2
    [opens] = points("tool_breaker_opens_total", name)
    assert opens.value == 1


def test_no_breaker_means_no_breaker_column(harness: Harness) -> None:
    harness.run([ok_tool()], [tool_call("get_weather", {"city": "Paris"}, id="c1")])
    assert harness.stats()["get_weather"]["breaker"] is None
