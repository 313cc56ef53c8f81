"""The MCP reference servers from PyPI (git, time, sqlite) and npm (filesystem) over stdio,
through every adapter.

Each server runs from a folder of its own (`tests/refservers.py`), as ``uvx`` or ``npx``
would run it; its tools are loaded with langchain-mcp-adapters, as users load them. These
tests skip, saying why, when the servers cannot be installed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from langchain_resilient_tools import Output, ToolPolicy
from langchain_resilient_tools.core.policy import PolicyResolver
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.mcp_session import BackgroundSession
from tests.refservers import server_or_skip
from tests.support.answers import by_id

pytestmark = pytest.mark.slow  # servers installed from PyPI and npm: CI runs it on one Python

OUTSIDE = "/srv/not-the-repo/project"
"""A repository path the model asks for that the git server does not allow."""


def connections(repo: Path, db: Path) -> dict[str, Any]:
    git, time_, sqlite = (
        server_or_skip(s) for s in ("mcp-server-git", "mcp-server-time", "mcp-server-sqlite")
    )
    return {
        "git": {"transport": "stdio", "command": str(git), "args": ["--repository", str(repo)]},
        "time": {"transport": "stdio", "command": str(time_), "args": []},
        "sqlite": {"transport": "stdio", "command": str(sqlite), "args": ["--db-path", str(db)]},
    }


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("mcp-ref")
    repo = base / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    yield connections(repo, base / "test.db")


@pytest.fixture(scope="module")
def ref_tools(servers: dict[str, Any]) -> list[BaseTool]:
    return asyncio.run(MultiServerMCPClient(servers).get_tools())


def answer(result: Any, call_id: str) -> dict[str, Any]:
    """An error answer as ``{"error", "message"}``: the envelope's, or for an ``isError``
    result, which the MCP tool answers itself (its own ``handle_tool_error``), the
    server's own text (``error`` is then ``"tool_error"`` as stats and records count it)."""
    message = result[call_id]
    assert message.status == "error", message.content
    content = message.content
    if isinstance(content, str) and content.startswith("{"):
        data: dict[str, Any] = json.loads(content)
        return data
    blocks = content if isinstance(content, list) else [content]
    text = " ".join(b if isinstance(b, str) else str(b.get("text", "")) for b in blocks)
    return {"error": "tool_error", "message": text}


CALLS = [
    tool_call("git_status", {"repo_path": OUTSIDE}, id="outside"),
    tool_call("get_current_time", {"timezone": "Mars/Olympus_Mons"}, id="bad_zone"),
    tool_call("read_query", {"query": "SELECT * FROM no_such_table"}, id="db_error"),
    tool_call("read_query", {"query": "DELETE FROM t"}, id="refused"),
    tool_call("read_query", {"query": "SELECT 'Error: only a value' AS note"}, id="mentions"),
    tool_call("list_tables", {}, id="ok"),
]


def test_reference_server_errors_reach_the_model(
    harness: Harness, ref_tools: list[BaseTool]
) -> None:
    result = harness.run(ref_tools, CALLS)
    outside = answer(result, "outside")
    assert outside["error"] == "tool_error"
    assert OUTSIDE in outside["message"]  # the model sees which argument was wrong
    assert "<path>" not in outside["message"]
    zone = answer(result, "bad_zone")
    assert zone["error"] == "tool_error" and "Mars/Olympus_Mons" in zone["message"]
    db = answer(result, "db_error")  # a plain "Database error: ..." text, no isError
    assert db["error"] == "tool_error" and "no such table: no_such_table" in db["message"]
    refused = answer(result, "refused")  # a plain "Error: ..." text
    assert refused["error"] == "tool_error" and "Only SELECT" in refused["message"]
    assert result["mentions"].status == "success"  # a result that merely mentions an error
    assert "Error: only a value" in str(result["mentions"].content)
    assert result["ok"].status == "success"


SESSION_CALLS = [
    tool_call("git_status", {"repo_path": OUTSIDE}, id="outside"),
    tool_call("git_status", {"repo_path": "REPO"}, id="log"),
]


async def test_session_bound_tools_sync_and_async(
    harness: Harness, servers: dict[str, Any]
) -> None:
    repo = servers["git"]["args"][1]
    calls = [{**c, "args": {**c["args"], "repo_path": c["args"]["repo_path"].replace("REPO", repo)}}
             for c in SESSION_CALLS]  # fmt: skip
    client = MultiServerMCPClient(servers)
    if harness.mode == "sync":  # sync code; the session lives on a loop in another thread
        held = await asyncio.to_thread(BackgroundSession, client, "git")
        try:
            graph = harness.build(held.tools, ai=AIMessage("", tool_calls=calls))
            payload = payload_for(harness, calls)
            state = await asyncio.to_thread(graph.invoke, payload)
        finally:
            await asyncio.to_thread(held.close)
    else:
        async with client.session("git") as session:
            tools = await load_mcp_tools(session)
            graph = harness.build(tools, ai=AIMessage("", tool_calls=calls))
            state = await graph.ainvoke(payload_for(harness, calls))
    answers = by_id(state["messages"])
    assert OUTSIDE in answer(answers, "outside")["message"]
    assert answers["log"].status == "success", answers["log"].content


def payload_for(harness: Harness, calls: list[dict[str, Any]]) -> dict[str, Any]:
    ai = AIMessage("", tool_calls=calls)
    return {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}


def test_filesystem_server_names_its_allowed_directories(harness: Harness, tmp_path: Path) -> None:
    """What the filesystem server says to help the model fix its call (the directories it
    may read) reaches the model, as do the paths the model sent."""
    fs = server_or_skip("mcp-server-filesystem")
    allowed = (tmp_path / "data").resolve()
    allowed.mkdir()
    (allowed / "a.txt").write_text("hello")
    connection = {"transport": "stdio", "command": str(fs), "args": [str(allowed)]}
    tools = asyncio.run(MultiServerMCPClient({"fs": connection}).get_tools())
    missing = str(allowed / "missing.txt")
    calls = [
        tool_call("read_text_file", {"path": "/etc/passwd"}, id="outside"),
        tool_call("read_text_file", {"path": missing}, id="missing"),
        tool_call("read_text_file", {"path": str(allowed / "a.txt")}, id="ok"),
        tool_call("list_allowed_directories", {}, id="dirs"),
    ]
    result = harness.run(tools, calls)
    assert answer(result, "outside") == {
        "error": "tool_error",
        "message": f"Access denied - path outside allowed directories: /etc/passwd not in {allowed}",
    }
    assert missing in answer(result, "missing")["message"]
    assert result["ok"].status == "success" and "hello" in str(result["ok"].content)
    assert str(allowed) in str(result["dirs"].content)


# -- the reference servers' own annotations -----------------------------------------------

GIT_READS = {"git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_log",
             "git_show", "git_branch"}  # fmt: skip
GIT_SAFE_WRITES = {"git_add", "git_reset"}
"""Declared idempotent (not read-only): the same call again changes nothing more."""


def test_what_the_reference_servers_annotations_decide(ref_tools: list[BaseTool]) -> None:
    """mcp-server-git and mcp-server-time annotate their tools; mcp-server-sqlite does not.
    Trusted, the annotations decide; by default ("cautious") they only ever add care, so
    git_status stays a write by its name (which reads as neither)."""
    tools = {t.name: t for t in ref_tools}
    trusted = PolicyResolver(ToolPolicy(annotations="trust"))
    cautious = PolicyResolver()
    for name, tool in tools.items():
        trust, default = trusted.resolve(name, tool), cautious.resolve(name, tool)
        if name.startswith("git_"):
            expected = (
                "read" if name in GIT_READS
                else "idempotent_write" if name in GIT_SAFE_WRITES
                else "write"
            )  # fmt: skip
            assert (trust.access, trust.classified_by) == (expected, "annotations"), name
            assert (default.access, default.classified_by) == ("write", "name"), name
        elif name in ("get_current_time", "convert_time"):
            assert (trust.access, trust.classified_by) == ("read", "annotations")
            assert (default.access, default.classified_by) == ("read", "name")
        else:  # the sqlite server's tools: no annotations, the name decides
            assert tools[name].metadata is None
            assert trust.classified_by == default.classified_by == "name"
    assert {"git_commit", "git_checkout", "git_create_branch"} <= set(tools)


def test_git_log_trusted_git_status_not(
    harness: Harness, servers: dict[str, Any], ref_tools: list[BaseTool]
) -> None:
    """Through every adapter: the record and stats() say what decided each call."""
    repo = servers["git"]["args"][1]
    tools = [t for t in ref_tools if t.name in ("git_status", "git_log")]
    calls = [
        tool_call("git_status", {"repo_path": repo}, id="status"),
        tool_call("git_log", {"repo_path": repo}, id="log"),
    ]
    result = harness.run(
        tools,
        calls,
        policy=ToolPolicy(output=Output(attach_record=True)),
        policies={"git_log": ToolPolicy(annotations="trust")},
    )
    record = {k: m.response_metadata["resilience"] for k, m in result.messages.items()}
    assert (record["status"]["classified_as"], record["status"]["classified_by"]) == (
        "write", "name",
    )  # fmt: skip
    assert (record["log"]["classified_as"], record["log"]["classified_by"]) == (
        "read", "annotations",
    )  # fmt: skip
    rows = harness.stats()
    assert rows["git_log"]["classified_by"] == "annotations"
    assert rows["git_status"]["classified_by"] == "name"
