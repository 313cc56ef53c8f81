"""Statistics: pure counting, rendering, and a scripted workload through every adapter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler

from langchain_resilient_tools import RetryPolicy, ToolPolicy
from langchain_resilient_tools.core.call import CallRecord
from langchain_resilient_tools.core.errors import ToolErrorType
from langchain_resilient_tools.observe.observer import Observer
from langchain_resilient_tools.observe.stats import UNKNOWN_TOOL_LABEL, CallEvent, Stats, percentile
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.tools import failing_tool, flaky_tool, hung_sync_tool, ok_tool


def event(tool: str = "t", *, error: str | None = None, ms: float = 10.0, **kw: Any) -> CallEvent:
    values: dict[str, Any] = {
        "call_id": "c",
        "outcome": "error" if error else "success",
        "error": error,
        "attempts": 1,
        "duration_ms": ms,
        "repairs": (),
        "served_by": "tool",
        "breaker": None,
        "at": 1000.0,
    }
    values.update(kw)
    return CallEvent(tool=tool, **values)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_counts_by_outcome_error_type_and_server() -> None:
    stats = Stats()
    stats.add(event(ms=10, attempts=3))
    stats.add(event(ms=30, error="timeout", attempts=2))
    stats.add(event(ms=20, error="timeout"))
    stats.add(event(ms=5, served_by="cache", repairs=("renamed q -> query",)))
    row = stats.snapshot()["t"]
    assert row["calls"] == 4 and row["success"] == 2 and row["errors"] == 2
    assert row["error_rate"] == 0.5
    assert row["errors_by_type"] == {"timeout": 2}
    assert row["attempts"] == 7 and row["retries"] == 3
    assert row["repairs"] == 1
    assert row["served_by"] == {"cache": 1, "tool": 3}
    assert (row["p50_ms"], row["max_ms"]) == (10.0, 30.0)
    assert row["breaker"] is None and row["breaker_opens"] == 0


def test_a_batch_is_counted_as_each_event_alone() -> None:
    """Events queued past a batch (two tools, plain calls among errors, retries, repairs
    and hedges) count as they would one by one; the last classification stands."""
    mixed = [
        event("a", ms=float(i), classified_as="read", classified_by="name")
        if i % 3
        else event("b", ms=float(i), attempts=1 + i % 4, classified_by="explicit")
        for i in range(300)
    ]
    mixed[7] = event("a", error="timeout", attempts=2, served_by="fallback")
    mixed[9] = event("a", repairs=("renamed q -> query",), hedges=1, attempts=2, hedge_won=True)
    batched, alone = Stats(), Stats()
    for e in mixed:
        batched.add(e)
    for e in mixed:  # a breaker state makes each event counted at once
        alone.add(e._replace(breaker="closed"))
    rows = {r["tool"]: r for r in batched.snapshot().rows()}
    expected = {r["tool"]: {**r, "breaker": None} for r in alone.snapshot().rows()}
    assert rows == expected
    assert rows["a"]["retries"] == 1 and rows["a"]["hedges"] == 1 and rows["a"]["repairs"] == 1
    assert rows["a"]["classified_by"] == "name" and rows["b"]["classified_by"] == "explicit"
    assert [e.call_id for e in batched.snapshot().events] == [e.call_id for e in mixed[-1000:]]


def test_memory_is_bounded() -> None:
    stats = Stats(max_events=5, latency_window=3)
    for i in range(100):
        stats.add(event(ms=float(i)))
    snap = stats.snapshot()
    assert len(snap.events) == 5
    assert snap["t"]["calls"] == 100  # counters keep counting
    assert snap["t"]["p50_ms"] == 98.0  # percentiles of the last 3 latencies only
    assert snap["t"]["max_ms"] == 99.0


def test_breaker_opens_are_counted_on_transitions() -> None:
    stats = Stats()
    states = ["closed", "closed", "open", "open", "half_open", "open", "closed"]
    opened = [stats.add(event(breaker=s)) for s in states]
    assert opened == [False, False, True, False, False, True, False]
    assert stats.snapshot()["t"]["breaker_opens"] == 2
    assert stats.snapshot()["t"]["breaker"] == "closed"


def test_rendering() -> None:
    stats = Stats()
    stats.add(event("get_weather", ms=12.5))
    stats.add(event("get_<b>", error="timeout", ms=300))
    snap = stats.snapshot()
    text = str(snap)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["tool", "calls", "success", "errors"]
    assert any(line.startswith("get_weather") for line in lines)
    assert "timeout=1" in text
    page = snap._repr_html_()
    assert page.startswith("<table>") and page.count("<tr>") == 3
    assert "get_&lt;b&gt;" in page and "<b>" not in page
    assert [r["tool"] for r in snap.rows()] == ["get_<b>", "get_weather"]
    snap.rows()[0]["calls"] = 99  # rows are copies
    assert snap.rows()[0]["calls"] == 1
    with pytest.raises(KeyError):
        snap["nope"]


def test_plot_draws_latency_and_outcomes() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    stats = Stats()
    for i in range(4):
        stats.add(event("a", ms=float(i), at=1000.0 + i))
    stats.add(event("b", error="timeout", ms=50.0, at=1002.5))
    fig = stats.snapshot().plot()
    latency, outcomes = fig.axes
    assert len(latency.lines) == 2  # one latency series per tool
    assert list(latency.lines[0].get_ydata()) == [0.0, 1.0, 2.0, 3.0]
    assert {t.get_text() for t in outcomes.get_legend().get_texts()} == {"success", "timeout"}
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_plot_shows_a_hang_when_it_was_answered_with_legends_off_the_data() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = Stats()
    stats.add(event("get_report", error="timeout", ms=600.0, at=1000.0))
    for i in range(3):
        stats.add(event("get_weather", ms=1.0, at=1000.0 + i / 1000))
    fig = stats.snapshot().plot()
    latency, outcomes = fig.axes
    hang = next(line for line in latency.lines if line.get_label() == "get_report")
    assert list(hang.get_xdata()) == [pytest.approx(0.6)]  # at its answer, not its start
    assert latency.get_yscale() == "log"  # 1 ms and 600 ms both readable
    fig.canvas.draw()
    for ax in (latency, outcomes):  # each legend sits right of its axes, not over the data
        legend_box = ax.get_legend().get_window_extent()
        assert legend_box.x0 >= ax.get_window_extent().x1
    plt.close(fig)


# -- a scripted workload through every adapter -----------------------------------------

NO_RETRY = ToolPolicy(timeout=0.1, retry=RetryPolicy(max_attempts=1))


def workload(harness: Harness) -> Any:
    tools = [
        ok_tool("get_weather"),
        flaky_tool("search_docs", failures=2),
        failing_tool("get_order", ValueError("no order 42, password=hunter2")),
        hung_sync_tool("get_slow", harness.hang_event()),
    ]
    calls = [
        tool_call("get_weather", {"city": "Paris"}, id="c1"),
        tool_call("get_weather", {"city": "Rome"}, id="c2"),
        tool_call("search_docs", {"query": "q"}, id="c3"),
        tool_call("get_order", {"query": "42"}, id="c4"),
        tool_call("get_slow", {"query": "x"}, id="c5"),
    ]
    return harness.run(tools, calls, policies={"get_slow": NO_RETRY})


def test_stats_of_a_scripted_workload(harness: Harness) -> None:
    result = workload(harness)
    assert [result[c].status for c in ("c1", "c2", "c3", "c4", "c5")] == [
        "success", "success", "success", "error", "error",
    ]  # fmt: skip
    rows = harness.stats()
    assert set(rows) == {"get_weather", "search_docs", "get_order", "get_slow"}
    weather, search, order, slow = (
        rows[t] for t in ("get_weather", "search_docs", "get_order", "get_slow")
    )
    assert (weather["calls"], weather["success"], weather["attempts"], weather["retries"]) == (
        2, 2, 2, 0,
    )  # fmt: skip
    assert weather["served_by"] == {"tool": 2}
    assert (search["calls"], search["success"], search["attempts"], search["retries"]) == (
        1, 1, 3, 2,
    )  # fmt: skip
    assert order["errors_by_type"] == {"tool_error": 1} and order["error_rate"] == 1.0
    assert order["attempts"] == 1
    assert slow["errors_by_type"] == {"timeout": 1}
    assert 100 <= slow["max_ms"] < 1000
    assert slow["p50_ms"] == slow["max_ms"]


def test_calls_the_tool_never_ran_are_not_served_by_it(harness: Harness) -> None:
    tools = [ok_tool("get_weather"), ok_tool("create_note")]
    calls = [
        tool_call("get_weather", {"city": "Paris"}, id="c1"),
        tool_call("get_weather", {"town": 3, "city": 4}, id="c2"),  # invalid arguments
        tool_call("create_note", {"city": "x"}, id="c3"),
        tool_call("create_note", {"city": "x"}, id="c4"),  # a blocked duplicate write
        tool_call("made_up_tool_1", {}, id="c5"),
        tool_call("made_up_tool_2", {}, id="c6"),
    ]
    result = harness.run(tools, calls)
    assert json.loads(result["c2"].content)["error"] == "invalid_arguments"
    assert sorted(result[c].status for c in ("c3", "c4")) == ["error", "success"]
    rows = harness.stats()
    assert rows["get_weather"]["served_by"] == {"tool": 1, "validation": 1}
    assert rows["create_note"]["served_by"] == {"tool": 1, "dedup": 1}
    assert not {"made_up_tool_1", "made_up_tool_2"} & set(rows)
    if harness.adapter != "tool":  # a bare wrapper never sees an unknown tool: ToolNode does
        unknown = rows["<unknown>"]
        assert unknown["calls"] == 2 and unknown["served_by"] == {"admission": 2}
        assert unknown["errors_by_type"] == {"unknown_tool": 2}
        events = harness.adapters[-1].stats().events
        assert {e.tool for e in events if e.error == "unknown_tool"} == {"<unknown>"}


def test_stats_table_renders_the_workload(harness: Harness) -> None:
    workload(harness)
    adapter = harness.adapters[-1]
    text = str(adapter.stats())
    assert "get_slow" in text or harness.adapter == "tool"
    assert "hunter2" not in text + json.dumps(adapter.stats().rows())


# -- LangChain callback events ---------------------------------------------------------


class Collector(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "resilience":
            self.events.append(data)


class AsyncCollector(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "resilience":
            self.events.append(data)


@pytest.mark.parametrize("handler_type", [Collector, AsyncCollector])
def test_callbacks_receive_a_resilience_event_per_call(
    harness: Harness, handler_type: type[Any]
) -> None:
    handler = handler_type()
    tools = [flaky_tool("search_docs", failures=1), ok_tool("get_weather")]
    calls = [
        tool_call("search_docs", {"query": "q"}, id="c1"),
        tool_call("get_weather", {"city": "Oslo"}, id="c2"),
    ]
    harness.run(tools, calls, config={"callbacks": [handler]})
    by_id = {e["call_id"]: e for e in handler.events}
    assert set(by_id) == {"c1", "c2"}
    assert by_id["c1"]["attempts"] == 2 and by_id["c1"]["outcome"] == "success"
    assert by_id["c2"]["tool"] == "get_weather" and by_id["c2"]["served_by"] == "tool"


def test_no_event_outside_a_run() -> None:
    from langchain_resilient_tools import ResilientTool

    tool = ResilientTool.wrap(ok_tool())
    assert tool.invoke({"city": "Paris"}) == "sunny in Paris"
    assert tool.stats()["get_weather"]["calls"] == 1


def test_an_event_carries_every_field_of_its_record() -> None:
    """The observer builds its `CallEvent` from the record by position: each field gets
    its own value (a distinct one per field here, so a shifted field shows)."""
    record = CallRecord(
        tool="get_x",
        call_id="c9",
        attempts=3,
        outcome="error",
        error=ToolErrorType.TIMEOUT,
        served_by="stale_cache",
        repairs=["renamed q -> query"],
        duration_ms=12.5,
        started_at=1234.0,
        hedges=1,
        hedge_won=True,
        hedge_winner=1,
        classified_as="read",
        classified_by="name",
        breaker="half_open",
    )
    event = Observer().observe(record)
    assert event._asdict() == {
        "tool": "get_x",
        "call_id": "c9",
        "outcome": "error",
        "error": "timeout",
        "attempts": 3,
        "duration_ms": 12.5,
        "repairs": ("renamed q -> query",),
        "served_by": "stale_cache",
        "breaker": "half_open",
        "at": 1234.0,
        "hedges": 1,
        "hedge_won": True,
        "hedge_winner": 1,
        "classified_as": "read",
        "classified_by": "name",
    }
    unknown = Observer().observe(record, known_tool=False)
    assert (unknown.tool, unknown.classified_as, unknown.classified_by) == (
        UNKNOWN_TOOL_LABEL,
        None,
        None,
    )
