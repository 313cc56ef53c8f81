"""The core scenario table, run against every adapter, sync and async."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from langchain_core.tools import StructuredTool, ToolException

from langchain_resilient_tools import Output, RetryPolicy, Timeouts, ToolPolicy
from langchain_resilient_tools.testing import invalid_call, tool_call
from tests.conftest import Harness
from tests.tools import (
    CALLS,
    counted,
    failing_tool,
    flaky_tool,
    hung_async_tool,
    hung_sync_tool,
    ok_tool,
    started,
)

SECRETS = ("hunter2", "sk-live-abcdef1234567890abcdef", "/srv/app/secrets.py", "Traceback")


def body(message: Any) -> dict[str, Any]:
    assert message.status == "error", message.content
    data = json.loads(message.content)
    assert set(data) >= {"error", "tool", "message", "suggestion", "retryable", "attempts"}
    return data


def no_secrets(result: Any) -> None:
    text = " ".join(str(m.content) for m in result.messages.values()) + json.dumps(
        result.tool_errors, default=str
    )
    for secret in SECRETS:
        assert secret not in text


def test_success(harness: Harness) -> None:
    result = harness.run([ok_tool()], [tool_call("get_weather", {"city": "Paris"}, id="c1")])
    message = result["c1"]
    assert message.status == "success"
    assert message.content == "sunny in Paris"
    # A healthy call is answered exactly as the tool answers: no record attached ...
    assert message.response_metadata == {}
    assert result.tool_errors == []
    # ... but it is in the statistics,
    assert harness.stats()["get_weather"]["calls"] == 1
    # and attached to every answer on request.
    again = harness.run(
        [ok_tool()],
        [tool_call("get_weather", {"city": "Paris"}, id="c2")],
        policy=ToolPolicy(output=Output(attach_record=True)),
    )
    record = again["c2"].response_metadata["resilience"]
    assert record["attempts"] == 1 and record["outcome"] == "success"
    assert record["served_by"] == "tool" and record["repairs"] == []


def test_transient_failure_then_success(harness: Harness, testing_mode: Any) -> None:
    tool = flaky_tool("search_docs", failures=2)
    result = harness.run([tool], [tool_call("search_docs", {"query": "q"}, id="c1")])
    assert result["c1"].status == "success"
    assert result["c1"].content == "result for q"
    assert CALLS["search_docs"] == 3
    assert result["c1"].response_metadata["resilience"]["attempts"] == 3
    assert len(testing_mode.sleeps) == 2  # two backoff waits, none slept for real


def test_transient_failure_exhausts_attempts(harness: Harness) -> None:
    tool = flaky_tool("search_docs", failures=10)
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=4))
    result = harness.run([tool], [tool_call("search_docs", {"query": "q"}, id="c1")], policy=policy)
    data = body(result["c1"])
    assert data["error"] == "transient_failure"
    assert data["retryable"] is True and data["attempts"] == 4
    assert CALLS["search_docs"] == 4
    assert "fix your mistakes" not in data["message"].lower()
    no_secrets(result)
    if harness.adapter != "tool":  # a wrapped tool in a plain ToolNode cannot write state
        assert [r["error"] for r in result.tool_errors] == ["transient_failure"]


@pytest.mark.parametrize(
    "exc",
    [ValueError("bad date, password=hunter2"), ToolException("no such city"), KeyError("x")],
    ids=["ValueError", "ToolException", "KeyError"],
)
def test_non_retryable_error(harness: Harness, exc: Exception) -> None:
    result = harness.run([failing_tool("get_city", exc)], [tool_call("get_city", {}, id="c1")])
    data = body(result["c1"])
    assert data["error"] == "tool_error" and data["retryable"] is False
    assert CALLS["get_city"] == 1 and data["attempts"] == 1
    assert "ValueError(" not in data["message"]
    no_secrets(result)


def test_unexpected_exception_is_opaque(harness: Harness) -> None:
    exc = RuntimeError('Traceback (most recent call last): File "/srv/app/secrets.py" hunter2')
    result = harness.run([failing_tool("get_city", exc)], [tool_call("get_city", {}, id="c1")])
    data = body(result["c1"])
    assert data["error"] == "tool_error"
    assert "RuntimeError" in data["message"]
    no_secrets(result)


@pytest.mark.realtime
def test_timeout_of_hung_sync_tool(harness: Harness) -> None:
    """Only a real clock shows control coming back at the 0.2 s deadlines while the tool
    still hangs (30 s): a generous bound for a loaded machine, far below the hang.

    No backoff and a call deadline of its own: with the default one (``2 * timeout + 1``
    s) and a jittered backoff of up to 1 s (computed, though not slept, in testing mode),
    a first timeout that came back late on a loaded machine left the retry no time, and
    the call was rightly answered after one attempt."""
    tool = hung_sync_tool("get_report", harness.hang_event())
    policy = ToolPolicy(
        timeout=0.2,
        retry=RetryPolicy(max_attempts=2, initial_delay=0, jitter=0),
        timeouts=Timeouts(deadline=8.0),
    )
    start = time.monotonic()
    result = harness.run([tool], [tool_call("get_report", {}, id="c1")], policy=policy)
    elapsed = time.monotonic() - start
    data = body(result["c1"])
    assert data["error"] == "timeout" and data["retryable"] is True
    assert data["attempts"] == 2
    assert elapsed < 10.0  # control came back at the deadlines (2 x 0.2 s), not at 30 s


def test_hung_sync_tool_threads_are_counted_and_capped(harness: Harness) -> None:
    """Each adapter runs sync tools on the pipeline's own workers, in both modes (under
    ``create_agent``'s async path too, where LangChain would use the loop's default
    executor): a thread left hung at its deadline is counted, and once a tool holds
    ``Timeouts.max_abandoned_threads`` of them its calls are refused at once, without running."""
    release = harness.hang_event()
    threads: list[str] = []

    def hang(query: str = "") -> str:
        threads.append(threading.current_thread().name)
        release.wait(30)
        return "late"

    tool = counted(f"get_stuck_{harness.adapter}_{harness.mode}", hang)
    policy = ToolPolicy(
        timeout=0.2, retry=RetryPolicy(max_attempts=1), timeouts=Timeouts(max_abandoned_threads=2)
    )
    turns = [[tool_call(tool.name, {"query": str(i)}, id=f"c{i}")] for i in range(3)]
    results = harness.run_turns([tool], turns, policy=policy)  # one adapter, three turns
    errors = [body(results[i][f"c{i}"])["error"] for i in range(3)]
    assert errors == ["timeout", "timeout", "transient_failure"]
    assert "busy" in body(results[2]["c2"])["message"].lower()
    assert started(tool.name, 2) == 2  # the third call never started
    assert all(name.startswith("lrt-tool") for name in threads), threads
    # Another adapter of the same tool has its own count: its call runs (and times out).
    again = harness.run([tool], [tool_call(tool.name, {"query": "x"}, id="d0")], policy=policy)
    assert body(again["d0"])["error"] == "timeout"
    assert started(tool.name, 3) == 3
    release.set()


def test_async_only_tool_answers_from_sync_code(harness: Harness) -> None:
    """An async-only tool (an MCP tool, for one) has no sync code: LangChain's ``invoke``
    raises ``NotImplementedError``. Every adapter runs its coroutine from sync code too
    (its timeout: `test_timeout_of_hung_async_tool`)."""

    async def lookup(query: str) -> str:
        return f"found {query}"

    tool = StructuredTool.from_function(coroutine=lookup, name="lookup", description="Look up.")
    calls = [tool_call("lookup", {"query": q}, id=q) for q in ("a", "b")]
    result = harness.run([tool], calls)
    assert [result[q].content for q in ("a", "b")] == ["found a", "found b"]
    assert all(result[q].status == "success" for q in ("a", "b"))


def cancelled_soon(cancelled: list[str], within: float = 10.0) -> list[str]:
    """`cancelled` once a tool has put its name there, or after `within` s (in sync mode
    the coroutine is cancelled on a loop of ours, just after the answer)."""
    deadline = time.monotonic() + within
    while not cancelled and time.monotonic() < deadline:
        time.sleep(0.01)
    return cancelled


@pytest.mark.realtime
def test_timeout_of_hung_async_tool(harness: Harness) -> None:
    """Async-only (see `hung_async_tool`): in sync mode it runs on a private loop. Control
    comes back at the 0.2 s deadline, not when the 30 s tool ends (a generous bound)."""
    cancelled: list[str] = []
    tool = hung_async_tool("get_report", cancelled)
    policy = ToolPolicy(timeout=0.2, retry=RetryPolicy(max_attempts=1))
    start = time.monotonic()
    result = harness.run([tool], [tool_call("get_report", {}, id="c1")], policy=policy)
    elapsed = time.monotonic() - start
    assert body(result["c1"])["error"] == "timeout"
    assert elapsed < 10.0
    assert cancelled_soon(cancelled) == ["get_report"]  # cancellation reached the tool


@pytest.mark.realtime
def test_hung_async_tool_is_cancelled_at_its_attempts_own_timeout(harness: Harness) -> None:
    """An attempt whose timeout is shorter than the policy's (here capped by the call's
    deadline) cancels an async-only tool's coroutine then, from sync code too: it is not
    left running on a loop of ours, holding a worker thread, until the policy's 30 s."""
    cancelled: list[str] = []
    tool = hung_async_tool("get_report", cancelled)
    policy = ToolPolicy(
        timeout=30, retry=RetryPolicy(max_attempts=1), timeouts=Timeouts(deadline=0.3)
    )
    result = harness.run([tool], [tool_call("get_report", {}, id="c1")], policy=policy)
    assert body(result["c1"])["error"] == "timeout"
    assert cancelled_soon(cancelled) == ["get_report"]  # cancellation reached the tool


def test_non_idempotent_timeout_is_unknown_outcome(harness: Harness) -> None:
    tool = hung_sync_tool("create_order", harness.hang_event())
    policy = ToolPolicy(timeout=0.2, retry=RetryPolicy(max_attempts=5))
    result = harness.run([tool], [tool_call("create_order", {}, id="c1")], policy=policy)
    data = body(result["c1"])
    assert data["error"] == "unknown_outcome" and data["retryable"] is False
    assert data["attempts"] == 1
    assert started("create_order") == 1
    assert "may or may not" in data["message"]


def test_non_idempotent_connection_error_is_not_retried(harness: Harness) -> None:
    tool = flaky_tool("send_email", failures=1)
    result = harness.run([tool], [tool_call("send_email", {"query": "hi"}, id="c1")])
    data = body(result["c1"])
    assert data["error"] == "unknown_outcome"
    assert CALLS["send_email"] == 1
    no_secrets(result)


def test_explicit_idempotent_wins_over_name(harness: Harness) -> None:
    tool = flaky_tool("send_ping", failures=1)
    policy = ToolPolicy(idempotent=True)
    result = harness.run([tool], [tool_call("send_ping", {"query": "x"}, id="c1")], policy=policy)
    assert result["c1"].status == "success"
    assert CALLS["send_ping"] == 2


def test_retry_on_predicate(harness: Harness) -> None:
    tool = flaky_tool("get_quote", failures=1, exc_type=LookupError)
    policy = ToolPolicy(retry=RetryPolicy(retry_on=LookupError))
    result = harness.run([tool], [tool_call("get_quote", {"query": "x"}, id="c1")], policy=policy)
    assert result["c1"].status == "success"
    assert CALLS["get_quote"] == 2


def test_per_tool_policy_overrides_only_its_fields(harness: Harness) -> None:
    tools = [flaky_tool("get_a", failures=5), flaky_tool("get_b", failures=5)]
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=2))
    policies = {"get_b": ToolPolicy(idempotent=False)}
    result = harness.run(
        tools,
        [tool_call("get_a", {"query": "x"}, id="a"), tool_call("get_b", {"query": "x"}, id="b")],
        policy=policy,
        policies=policies,
    )
    assert (CALLS["get_a"], CALLS["get_b"]) == (2, 1)
    assert body(result["b"])["error"] == "unknown_outcome"


def test_unknown_tool(harness: Harness) -> None:
    if harness.adapter == "tool":
        pytest.skip("a wrapped tool is only reached by its own name")
    result = harness.run([ok_tool()], [tool_call("get_wether", {"city": "x"}, id="c1")])
    data = body(result["c1"])
    assert data["error"] == "unknown_tool"
    assert data["valid_tools"] == ["get_weather"]
    assert data["closest"] == "get_weather"


def test_invalid_tool_call_is_answered(harness: Harness) -> None:
    if harness.adapter == "tool":
        pytest.skip("invalid calls never reach a tool; the node and middleware answer them")
    result = harness.run(
        [ok_tool()],
        [tool_call("get_weather", {"city": "Oslo"}, id="ok")],
        invalid_tool_calls=[invalid_call("get_weather", "{city: Paris", id="bad")],
    )
    assert result["ok"].status == "success"
    data = body(result["bad"])
    assert data["error"] == "malformed_call"
    assert "get_weather(city: string)" in data["suggestion"]


def test_parallel_calls_one_hanging(harness: Harness) -> None:
    """The hung call is cut at its 0.3 s; its healthy siblings keep the default timeout
    (five at once on a loaded machine may take longer than 0.3 s, and need not be quick)."""
    hung = hung_sync_tool("get_slow", harness.hang_event())
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=1))
    calls = [tool_call("get_slow", {}, id="slow")] + [
        tool_call("get_weather", {"city": f"c{i}"}, id=f"ok{i}") for i in range(5)
    ]
    result = harness.run(
        [hung, ok_tool()], calls, policy=policy, policies={"get_slow": ToolPolicy(timeout=0.3)}
    )
    assert body(result["slow"])["error"] == "timeout"
    for i in range(5):
        assert result[f"ok{i}"].content == f"sunny in c{i}"
    assert len(result.messages) == 6


def test_every_call_answered_exactly_once(harness: Harness) -> None:
    calls = [
        tool_call("get_weather", {"city": "a"}, id="1"),
        tool_call("create_order", {}, id="2"),
        tool_call("get_weather", {"city": "b"}, id="3"),
    ]
    tools = [ok_tool(), failing_tool("create_order", ValueError("out of stock"))]
    result = harness.run(tools, calls)
    state_answers = [m for m in result.state["messages"] if getattr(m, "tool_call_id", None)]
    assert sorted(m.tool_call_id for m in state_answers) == ["1", "2", "3"]
