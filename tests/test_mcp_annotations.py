"""MCP tool annotations decide reads and writes (`core.annotations`, `ToolPolicy.annotations`).

The rules are checked pure first; then against a real MCP server (`tests/mcp_annotated_server.py`,
FastMCP over stdio, loaded with langchain-mcp-adapters as users load it) through every
adapter, sync and async: each annotated tool's first call hangs past the timeout, so the
answer says whether the call was sent again (a read, or a write safe to repeat) or not.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langchain_mcp_adapters")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.checkpoint.memory import InMemorySaver

from langchain_resilient_tools import Output, ToolPolicy
from langchain_resilient_tools.core.annotations import ToolHints, classify, hints_of
from langchain_resilient_tools.core.policy import PolicyResolver, ResolvedPolicy
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.mcp_session import BackgroundSession
from tests.support.answers import by_id
from tests.tools import counted

SERVER = str(Path(__file__).with_name("mcp_annotated_server.py"))

# -- the rules ---------------------------------------------------------------------------


def annotated(name: str, **hints: Any) -> BaseTool:
    """A plain LangChain tool whose metadata carries hints as langchain-mcp-adapters puts
    them there (every hint key present, `None` for those not given)."""
    tool = counted(name, lambda key="": key)
    keys = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
    tool.metadata = {"title": None, **dict.fromkeys(keys), **hints}
    return tool


def test_hints_are_read_as_langchain_mcp_adapters_gives_them() -> None:
    assert hints_of(annotated("git_log", readOnlyHint=True)) == ToolHints(read_only=True)
    assert hints_of(counted("plain", lambda: "")) is None  # no metadata at all
    assert hints_of(annotated("titled", title="Weather")) is None  # says nothing
    assert hints_of(annotated("world", openWorldHint=True)) is None  # nor does this
    odd = annotated("odd")
    odd.metadata = {"readOnlyHint": "yes"}  # not a bool: not a hint
    assert hints_of(odd) is None


@pytest.mark.parametrize(
    ("name", "hints", "trust", "expected"),
    [
        # trust: the annotations decide, both ways, the spec's defaults for the rest
        ("git_log", {"readOnlyHint": True}, "trust", ("read", "annotations")),
        ("get_or_create", {"destructiveHint": True}, "trust", ("write", "annotations")),
        ("set_status", {"idempotentHint": True}, "trust", ("idempotent_write", "annotations")),
        ("get_x", {"readOnlyHint": False}, "trust", ("write", "annotations")),
        ("get_x", {"destructiveHint": False}, "trust", ("write", "annotations")),
        ("delete_x", {"readOnlyHint": True, "destructiveHint": True}, "trust",
         ("read", "annotations")),  # destructiveHint means nothing for a read-only tool
        # cautious: only towards more care
        ("git_log", {"readOnlyHint": True}, "cautious", ("write", "name")),
        ("get_or_create", {"destructiveHint": True}, "cautious", ("write", "annotations")),
        ("get_x", {"idempotentHint": True}, "cautious", ("idempotent_write", "annotations")),
        ("set_status", {"idempotentHint": True}, "cautious", ("write", "name")),
        ("get_weather", {"readOnlyHint": True}, "cautious", ("read", "name")),
        # ignore: the name alone
        ("git_log", {"readOnlyHint": True}, "ignore", ("write", "name")),
        ("get_or_create", {"destructiveHint": True}, "ignore", ("read", "name")),
    ],
)  # fmt: skip
def test_what_decides(name: str, hints: dict[str, Any], trust: Any, expected: Any) -> None:
    resolved = ResolvedPolicy(
        ToolPolicy(annotations=trust), name, hints_of(annotated(name, **hints))
    )
    assert (resolved.access, resolved.classified_by) == expected
    assert resolved.idempotent is (expected[0] != "write")  # sent again: reads, safe writes
    assert resolved.write is (expected[0] != "read")  # journaled, never hedged


def test_an_explicit_policy_always_wins() -> None:
    read_only = hints_of(annotated("git_log", readOnlyHint=True))
    destructive = hints_of(annotated("get_or_create", destructiveHint=True))
    for trust in ("trust", "cautious", "ignore"):
        write = ResolvedPolicy(
            ToolPolicy(idempotent=False, annotations=trust), "git_log", read_only
        )
        assert (write.access, write.classified_by) == ("write", "explicit")
        read = ResolvedPolicy(
            ToolPolicy(idempotent=True, annotations=trust), "get_or_create", destructive
        )
        assert (read.access, read.classified_by) == ("read", "explicit")
        keyed = ResolvedPolicy(
            ToolPolicy(idempotency_key=True, annotations=trust), "git_log", read_only
        )
        assert (keyed.access, keyed.classified_by) == ("idempotent_write", "explicit")


def test_no_hints_the_name_decides_as_before() -> None:
    assert classify(True, None, "trust") == ("read", "name")
    assert classify(False, None, "trust") == ("write", "name")
    assert ToolPolicy().annotations == "cautious"
    with pytest.raises(ValueError):
        ToolPolicy(annotations="always")  # type: ignore[arg-type]


def test_the_resolver_reads_the_tool_it_is_given(caplog: pytest.LogCaptureFixture) -> None:
    """A name resolved before its tool was known is resolved again once it is; a hint set
    aside by ``"cautious"`` is said once, with the fix."""
    tool = annotated("git_log", readOnlyHint=True)
    resolver = PolicyResolver(ToolPolicy(annotations="trust"))
    assert resolver.resolve("git_log").access == "write"  # by name: no tool yet
    resolved = resolver.resolve("git_log", tool)
    assert (resolved.access, resolved.classified_by) == ("read", "annotations")
    assert resolver.resolve("git_log") is resolved is resolver.resolve("git_log", tool)
    rerun = resolver.for_rerun("git_log")
    assert rerun.access == "read" and rerun.rerun
    with caplog.at_level(logging.INFO, logger="langchain_resilient_tools.core.policy"):
        cautious = PolicyResolver()
        cautious.resolve("git_log", tool)
        cautious.resolve("git_log", tool)
    [said] = [r.getMessage() for r in caplog.records]
    assert "'git_log'" in said and 'annotations="trust"' in said


def test_per_tool_trust_through_patterns_and_policies() -> None:
    tools = [annotated("git_log", readOnlyHint=True), annotated("read_file", readOnlyHint=True)]
    resolver = PolicyResolver(patterns={"git_*": ToolPolicy(annotations="trust")})
    log, read = (resolver.resolve(t.name, t) for t in tools)
    assert (log.access, read.access) == ("read", "read")
    assert (log.classified_by, read.classified_by) == ("annotations", "name")


# -- a real MCP server, every adapter ----------------------------------------------------


def stdio_client() -> MultiServerMCPClient:
    return MultiServerMCPClient(
        {"a": {"transport": "stdio", "command": sys.executable, "args": [SERVER]}}
    )


Run = tuple[Sequence[dict[str, Any]], Mapping[str, Any]]
"""The tool calls of one run and the `Harness.build` keywords of its adapter."""


async def on_server(
    harness: Harness, runs: Sequence[Run]
) -> list[tuple[dict[str, ToolMessage], dict[str, dict[str, Any]]]]:
    """Each run through a graph of its own over one live stdio session; the answers by
    call id and the adapter's statistics by tool, per run."""
    out = []

    def payload(ai: AIMessage) -> dict[str, Any]:
        return {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}

    def answers(state: dict[str, Any]) -> dict[str, ToolMessage]:
        return by_id(state["messages"])

    if harness.mode == "sync":  # sync code, the session's loop running on another thread
        held = await asyncio.to_thread(BackgroundSession, stdio_client(), "a")
        try:
            for calls, build in runs:
                ai = AIMessage("", tool_calls=list(calls))
                graph = harness.build(held.tools, ai=ai, **build)
                state = await asyncio.to_thread(graph.invoke, payload(ai))
                out.append((answers(state), harness.stats()))
        finally:
            await asyncio.to_thread(held.close)
        return out
    async with stdio_client().session("a") as session:
        tools = await load_mcp_tools(session)
        for calls, build in runs:
            ai = AIMessage("", tool_calls=list(calls))
            graph = harness.build(tools, ai=ai, **build)
            out.append((answers(await graph.ainvoke(payload(ai))), harness.stats()))
    return out


def calls(run: str, stall: Sequence[str]) -> list[dict[str, Any]]:
    """One call of each tool; those in `stall` hang on their first execution."""
    names = ("git_log", "get_or_create_invoice", "sync_report", "set_status", "get_weather",
             "create_note")  # fmt: skip
    return [
        tool_call(n, {"key": f"stall-{run}" if n in stall else f"k-{run}"}, id=n) for n in names
    ]


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


POLICY = ToolPolicy(timeout=4.0, output=Output(attach_record=True))
"""4 s per attempt: a stalled call (60 s) times out, while a healthy call over stdio on a
loaded machine (it once took over 1 s under a full suite beside it) does not."""
STALLED = ("git_log", "get_or_create_invoice", "sync_report", "set_status")


async def test_annotations_decide_through_every_adapter(harness: Harness) -> None:
    explicit = {"git_log": ToolPolicy(idempotent=False), "get_or_create_invoice":
                ToolPolicy(idempotent=True)}  # fmt: skip
    trusting = POLICY.model_copy(update={"annotations": "trust"})
    (cautious, cautious_rows), (trusted, trusted_rows), (chosen, _) = await on_server(
        harness,
        [
            (calls("cautious", STALLED), {"policy": POLICY}),
            (calls("trust", STALLED), {"policy": trusting}),
            (calls("explicit", ("get_or_create_invoice",)),
             {"policy": trusting, "policies": explicit}),
        ],
    )  # fmt: skip
    # The default, "cautious": an annotation only ever makes a call more careful. The
    # invoice tool, named like a read but declared destructive, is a write: its timed-out
    # call is not sent again (by its name alone it was retried and ran twice).
    assert {k: outcome(m) for k, m in cautious.items()} == {
        "git_log": ("unknown_outcome", 1, "write", "name"),
        "get_or_create_invoice": ("unknown_outcome", 1, "write", "annotations"),
        "sync_report": ("unknown_outcome", 1, "write", "name"),
        "set_status": ("unknown_outcome", 1, "write", "name"),
        "get_weather": ("get_weather ran 1 time(s)", 1, "read", "name"),
        "create_note": ("create_note ran 1 time(s)", 1, "write", "name"),
    }
    # "trust": git_log and sync_report, declared read-only, are reads (retried);
    # set_status, declared idempotent, a write that is safe to repeat (retried too).
    assert {k: outcome(m) for k, m in trusted.items()} == {
        "git_log": ("git_log ran 2 time(s)", 2, "read", "annotations"),
        "get_or_create_invoice": ("unknown_outcome", 1, "write", "annotations"),
        "sync_report": ("sync_report ran 2 time(s)", 2, "read", "annotations"),
        "set_status": ("set_status ran 2 time(s)", 2, "idempotent_write", "annotations"),
        "get_weather": ("get_weather ran 1 time(s)", 1, "read", "name"),
        "create_note": ("create_note ran 1 time(s)", 1, "write", "name"),
    }
    # An explicit idempotent= wins over the annotations, either way.
    assert outcome(chosen["git_log"]) == ("git_log ran 1 time(s)", 1, "write", "explicit")
    assert outcome(chosen["get_or_create_invoice"]) == (
        "get_or_create_invoice ran 2 time(s)", 2, "read", "explicit",
    )  # fmt: skip
    # stats() says it too, per tool.
    by = {t: (r["classified_as"], r["classified_by"]) for t, r in cautious_rows.items()}
    assert by["get_or_create_invoice"] == ("write", "annotations")
    assert by["git_log"] == ("write", "name")
    by = {t: (r["classified_as"], r["classified_by"]) for t, r in trusted_rows.items()}
    assert by["git_log"] == ("read", "annotations")
    assert by["set_status"] == ("idempotent_write", "annotations")


def test_a_write_declared_idempotent_is_sent_again_after_its_worker_died(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write safe to repeat (trusted ``idempotentHint``) is journaled like any write;
    when its journal entry is orphaned (its worker died mid-call) it is sent again, as a
    keyed write is, where a plain write is answered ``unknown_outcome``."""
    from langchain_resilient_tools.pipeline.journal import logic
    from langchain_resilient_tools.pipeline.journal.entry import Entry
    from tests.tools import CALLS

    monkeypatch.setattr(Entry, "claim", lambda self: False)  # an entry is there ...
    monkeypatch.setattr(Entry, "read", lambda self: {"started": 0.0})
    monkeypatch.setattr(logic, "judge", lambda *a, **k: logic.Verdict.ORPHANED)  # ... orphaned
    tools = [annotated("set_status", idempotentHint=True), annotated("create_note")]
    ai = AIMessage("", tool_calls=[tool_call(t.name, {"key": "k"}, id=t.name) for t in tools])
    graph = harness.build(
        tools, policy=ToolPolicy(annotations="trust"), checkpointer=InMemorySaver(), ai=ai
    )
    payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
    state = harness.invoke(graph, payload, {"configurable": {"thread_id": "t-orphans"}})
    answers = by_id(state["messages"])
    assert answers["set_status"].status == "success"
    assert "no further effect when repeated" in str(answers["set_status"].content)
    assert CALLS["set_status"] == 1
    assert json.loads(str(answers["create_note"].content))["error"] == "unknown_outcome"
    assert CALLS["create_note"] == 0


def test_the_documented_example_prints_what_the_docs_show() -> None:
    """docs/mcp.md: its example runs as written (in a fresh interpreter) and prints the
    output shown below it."""
    text = (Path(__file__).parent.parent / "docs" / "mcp.md").read_text()
    match = re.search(r"```python\n(.*?)```\n.*?```text\n(.*?)```", text, flags=re.S)
    assert match, "docs/mcp.md: the example and its output"
    code, shown = match.groups()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == shown.strip()
