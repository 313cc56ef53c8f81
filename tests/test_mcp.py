"""Tools of a real MCP server (FastMCP over stdio and streamable HTTP) through every adapter.

The server (`tests/mcp_server.py`) runs as a subprocess; its tools are loaded with
langchain-mcp-adapters, exactly as users load them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langchain_mcp_adapters")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from langchain_resilient_tools import ResilientTool, RetryPolicy, ToolPolicy
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.mcp_session import BackgroundSession
from tests.support.answers import by_id, envelope
from tests.support.net import free_port

SERVER = str(Path(__file__).with_name("mcp_server.py"))
SECRETS = ("hunter2", "sk-live-abcdef1234567890abcdef")
POLICIES = {"get_slow": ToolPolicy(timeout=0.3, retry=RetryPolicy(max_attempts=1))}


def start_http_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the MCP test server did not start")
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}/mcp"


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait(timeout=10)


def http_client(url: str) -> MultiServerMCPClient:
    return MultiServerMCPClient({"t": {"transport": "streamable_http", "url": url}})


def stdio_client() -> MultiServerMCPClient:
    return MultiServerMCPClient(
        {"t": {"transport": "stdio", "command": sys.executable, "args": [SERVER, "stdio"]}}
    )


@pytest.fixture(scope="module")
def http_tools() -> Iterator[list[BaseTool]]:
    proc, url = start_http_server()
    try:
        yield asyncio.run(http_client(url).get_tools())
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def gone_server_tools() -> list[BaseTool]:
    """The tools of an HTTP server that is gone before they are called (each call opens
    a connection of its own, and finds nothing there)."""
    proc, url = start_http_server()
    try:
        return asyncio.run(http_client(url).get_tools())
    finally:
        stop(proc)


CALLS = [
    tool_call("get_weather", {"city": "Paris"}, id="ok"),
    tool_call("get_order", {"order_id": 7}, id="raises"),
    tool_call("search_docs", {"query": "x"}, id="is_error"),
    tool_call("get_slow", {"query": "x"}, id="hangs"),
    tool_call("get_weather", {"town": "Paris", "days": "x"}, id="bad_args"),
]


def check_answers(answers: dict[str, ToolMessage], *, hang: bool = True) -> None:
    assert answers["ok"].status == "success"
    assert "sunny in Paris" in str(answers["ok"].content)
    assert "resilience" not in answers["ok"].response_metadata  # nothing repaired: untouched
    # An isError result (FastMCP reports a raised exception as one too) is the server's
    # own answer for the model, which MCP tools give through their own
    # handle_tool_error: it reaches the model as the tool gives it, as ToolNode shows
    # it, with secrets scrubbed (checked below).
    for key, text in (("raises", "db error for 7"), ("is_error", "index offline")):
        own = answers[key]
        assert own.status == "error"
        assert text in json.dumps(own.content)  # the useful part stays
    bad = envelope(answers["bad_args"])
    assert bad["error"] == "invalid_arguments"
    if hang:
        slow = envelope(answers["hangs"])
        assert slow["error"] == "timeout" and slow["retryable"] is True
    text = json.dumps([m.content for m in answers.values()])
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.realtime
def test_http_server_through_every_adapter(harness: Harness, http_tools: list[BaseTool]) -> None:
    start = time.monotonic()
    result = harness.run(http_tools, CALLS, policies=POLICIES)
    assert time.monotonic() - start < 10  # the 30 s hang was cut at 0.3 s (a generous bound)
    check_answers(result.messages)
    rows = harness.stats()
    assert rows["get_slow"]["errors_by_type"] == {"timeout": 1}
    assert rows["get_weather"]["calls"] == 2


def text_of(message: ToolMessage) -> str:
    content = message.content
    if isinstance(content, list):
        return " ".join(b["text"] if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def test_server_error_text_loses_internals_not_help(
    harness: Harness, http_tools: list[BaseTool]
) -> None:
    path = "/srv/data/q3.csv"  # the model's own path stays
    calls = [
        tool_call("fail_with_secret", {"path": path}, id="raises"),
        tool_call("read_report", {"path": path}, id="traceback"),
    ]
    result = harness.run(http_tools, calls)
    raised = result["raises"]
    assert raised.status == "error"
    # The tool's name is no key ("backend" stays), the key goes and its bracket stays,
    # the code location goes, the directories the server serves reach the model.
    assert text_of(raised) == (
        f"Error executing tool fail_with_secret: backend rejected {path} (api_key=***). "
        "Allowed directories: /srv/data, /tmp/work"
    )
    assert text_of(result["traceback"]) == (
        f"FileNotFoundError: {path} not found; available reports are in /srv/data/reports"
    )
    assert harness.stats()["read_report"]["errors_by_type"] == {"tool_error": 1}


def test_transport_failure_is_a_retryable_infrastructure_error(
    harness: Harness, gone_server_tools: list[BaseTool]
) -> None:
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=2))
    # the read it calls (the server's other tools are no known reads: a retry for
    # every tool would be said to be ignored for them, `core.ignored`)
    reads = [t for t in gone_server_tools if t.name == CALLS[0]["name"]]
    result = harness.run(reads, [CALLS[0]], policy=policy)
    data = envelope(result["ok"])
    assert data["error"] == "transient_failure"
    assert data["retryable"] is True and data["attempts"] == 2
    assert "mistake" not in data["suggestion"].lower()


async def test_stdio_session_through_every_adapter(harness: Harness) -> None:
    if harness.mode == "sync":  # sync code, the session's loop running on another thread
        held = await asyncio.to_thread(BackgroundSession, stdio_client(), "t")
        try:
            ai = AIMessage("", tool_calls=CALLS)
            graph = harness.build(held.tools, policies=POLICIES, ai=ai)
            payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
            state = await asyncio.to_thread(graph.invoke, payload)
        finally:
            await asyncio.to_thread(held.close)
        answers = by_id(state["messages"])
        check_answers(answers)
        return
    async with stdio_client().session("t") as session:
        tools = await load_mcp_tools(session)
        ai = AIMessage("", tool_calls=CALLS)
        graph = harness.build(tools, policies=POLICIES, ai=ai)
        payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
        state = await graph.ainvoke(payload)
    answers = by_id(state["messages"])
    check_answers(answers)


def test_stdio_tool_is_callable_from_sync_code() -> None:
    tools = {t.name: t for t in asyncio.run(stdio_client().get_tools())}
    weather = ResilientTool.wrap(tools["get_weather"])
    message = weather.invoke(CALLS[0])
    assert message.status == "success" and "sunny in Paris" in str(message.content)
    search = ResilientTool.wrap(tools["search_docs"])
    # A plain call: the server's own isError answer, as the tool itself returns it
    # (its content), secrets scrubbed.
    text = json.dumps(search.invoke({"query": "x"}))
    assert "index offline" in text
    assert SECRETS[1] not in text


@pytest.mark.realtime
def test_sync_timeout_holds_for_async_only_tools(http_tools: list[BaseTool]) -> None:
    slow = next(t for t in http_tools if t.name == "get_slow")
    tool = ResilientTool.wrap(slow, policy=POLICIES["get_slow"])
    start = time.monotonic()
    data = json.loads(tool.invoke({"query": "x"}))
    assert data["error"] == "timeout"
    assert time.monotonic() - start < 10  # at the 0.3 s timeout, not the 30 s hang


def test_session_tool_called_sync_on_its_own_loop_says_why() -> None:
    held = BackgroundSession(stdio_client(), "t")
    try:
        weather = ResilientTool.wrap(next(t for t in held.tools if t.name == "get_weather"))

        async def blocking_call() -> Any:
            return weather.invoke(CALLS[0])  # sync code on the session's own loop

        message = held.run(blocking_call)
        data = envelope(message)
        assert data["error"] == "internal_error"  # not a misleading timeout
        assert "blocked" in data["message"] and "ainvoke" in data["suggestion"]
        ok = held.run(lambda: weather.ainvoke(CALLS[0]))  # the async call works
        assert ok.status == "success"
    finally:
        held.close()
