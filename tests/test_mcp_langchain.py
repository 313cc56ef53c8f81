"""Tools loaded with LangChain's own MCP adapter, `langchain.mcp.MCPAdapter` (``pip install
"langchain[mcp]"``: FastMCP 4, `mcp` 2.x), whose annotations sit in
``tool.metadata["mcp"]["tool"]["annotations"]`` (snake_case).

An in-process FastMCP 4 server (no process, no network), its tools loaded by `MCPAdapter`
as users load them, through every adapter, sync and async: each tool's first call with a
``stall`` key hangs past the timeout, so the answer says whether the call was sent again.
The `mcp` 1.x world (langchain-mcp-adapters) is `tests/test_mcp_annotations.py`.

These need `mcp` 2.x, which langchain-mcp-adapters (in the dev venv) does not speak:
``make suite-mcp2`` makes a venv of their own and runs them (CI does, once).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core._api import suppress_langchain_beta_warning
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langchain_resilient_tools import Output, ToolPolicy
from langchain_resilient_tools.core.annotations import ToolHints, hints_of
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.answers import by_id

# `mcp.server.mcpserver` is mcp 2.x's (1.x has `mcp.server.fastmcp`); fastmcp is what
# langchain.mcp is built on (langchain's `mcp` extra).
pytest.importorskip("mcp.server.mcpserver", reason="needs mcp 2.x: make suite-mcp2")
pytest.importorskip("fastmcp", reason="needs langchain[mcp] (fastmcp): make suite-mcp2")

from fastmcp import FastMCP
from mcp.types import ToolAnnotations

pytestmark = pytest.mark.mcp2
with suppress_langchain_beta_warning():  # "langchain.mcp is in beta", once per process
    from langchain.mcp import MCPAdapter

RUNS: Counter[tuple[str, str]] = Counter()
"""How many times each tool ran with each key (the server is in this process)."""


async def _run(tool: str, key: str) -> str:
    RUNS[tool, key] += 1
    if key.startswith("stall") and RUNS[tool, key] == 1:
        await asyncio.wait_for(asyncio.Event().wait(), 60)
    return f"{tool} ran {RUNS[tool, key]} time(s) for {key}"


def build_server() -> FastMCP:
    server = FastMCP("lrt-langchain-mcp")

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def get_or_create_invoice(key: str) -> str:
        """An invoice, created when missing (named like a read; declared destructive)."""
        return await _run("get_or_create_invoice", key)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def sync_report(key: str) -> str:
        """The sync report (read-only; its name reads as neither a read nor a write)."""
        return await _run("sync_report", key)

    @server.tool()
    async def create_note(key: str) -> str:
        """A note (not annotated at all)."""
        return await _run("create_note", key)

    return server


async def load(server: FastMCP) -> list[BaseTool]:
    async with MCPAdapter(server) as adapter:
        return await adapter.list_tools()


@pytest.fixture
def tools() -> Iterator[list[BaseTool]]:
    RUNS.clear()
    yield asyncio.run(load(build_server()))


def test_the_annotations_arrive_nested_in_snake_case(tools: list[BaseTool]) -> None:
    """What this file is about: `MCPAdapter`'s shape (not langchain-mcp-adapters')."""
    invoice = next(t for t in tools if t.name == "get_or_create_invoice")
    assert invoice.metadata is not None
    assert invoice.metadata["mcp"]["tool"]["annotations"] == {
        "read_only_hint": False,
        "destructive_hint": True,
    }
    assert "destructiveHint" not in invoice.metadata
    read = {t.name: hints_of(t) for t in tools}
    assert read == {
        "get_or_create_invoice": ToolHints(read_only=False, destructive=True),
        "sync_report": ToolHints(read_only=True, open_world=False),
        "create_note": None,
    }


def test_mcp_2s_own_annotations_object_is_read() -> None:
    """An ``mcp.types.ToolAnnotations`` (snake_case attributes in 2.x) where `langchain.mcp`
    puts its dict."""
    tool = StructuredTool.from_function(lambda: "", name="sync_report", description="r")
    tool.metadata = {"mcp": {"tool": {"annotations": ToolAnnotations(read_only_hint=True)}}}
    assert hints_of(tool) == ToolHints(read_only=True)


POLICY = ToolPolicy(timeout=2.0, output=Output(attach_record=True))
"""2 s per attempt: a stalled call (60 s) times out; a healthy in-process call takes ms."""


def outcome(message: ToolMessage) -> tuple[str, int, str, str]:
    """(what answered, attempts, classified as, classified by) of one answer."""
    record = message.response_metadata["resilience"]
    if message.status == "error":
        answer = json.loads(str(message.content))["error"]
    else:
        content = message.content
        blocks = content if isinstance(content, list) else [content]
        text = " ".join(b["text"] if isinstance(b, dict) else str(b) for b in blocks)
        answer = text.split(" for ")[0]
    return answer, record["attempts"], record["classified_as"], record["classified_by"]


def run(harness: Harness, tools: list[BaseTool], name: str, policy: ToolPolicy) -> dict[str, Any]:
    """One stalled call of each annotated tool, and a healthy unannotated one."""
    calls = [
        tool_call("get_or_create_invoice", {"key": f"stall-{name}"}, id="invoice"),
        tool_call("sync_report", {"key": f"stall-{name}"}, id="report"),
        tool_call("create_note", {"key": f"k-{name}"}, id="note"),
    ]
    ai = AIMessage("", tool_calls=calls)
    graph = harness.build(tools, ai=ai, policy=policy)
    payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
    state = harness.invoke(graph, payload)
    answers = by_id(state["messages"])
    return {k: outcome(m) for k, m in answers.items()}


def test_a_destructive_tool_named_like_a_read_is_never_sent_twice(
    harness: Harness, tools: list[BaseTool]
) -> None:
    """The default ("cautious"): the invoice tool, named like a read, is declared
    destructive: its timed-out call is answered `unknown_outcome`, not sent again."""
    assert run(harness, tools, "cautious", POLICY) == {
        "invoice": ("unknown_outcome", 1, "write", "annotations"),
        "report": ("unknown_outcome", 1, "write", "name"),  # not trusted to be a read
        "note": ("create_note ran 1 time(s)", 1, "write", "name"),
    }
    assert RUNS["get_or_create_invoice", "stall-cautious"] == 1


def test_a_read_only_tool_is_retried_when_trusted(harness: Harness, tools: list[BaseTool]) -> None:
    """``annotations="trust"``: `sync_report`, declared read-only, is a read: its
    timed-out call is sent again and answers."""
    trusting = POLICY.model_copy(update={"annotations": "trust"})
    assert run(harness, tools, "trust", trusting) == {
        "invoice": ("unknown_outcome", 1, "write", "annotations"),
        "report": ("sync_report ran 2 time(s)", 2, "read", "annotations"),
        "note": ("create_note ran 1 time(s)", 1, "write", "name"),
    }
    assert RUNS["get_or_create_invoice", "stall-trust"] == 1
