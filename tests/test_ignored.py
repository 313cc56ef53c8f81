"""Configuration is never silently ignored (DESIGN.md invariant 15).

A retry or a hedge the user set on a tool treated as a write cannot take effect (a
write is never sent twice): it is said once per adapter and tool, naming the tool and
the fix, when the adapter is built if it knows its tools (node, wrapper), else at the
tool's first call (middleware). Defaults are never reported. A tool that is no tool
(``ResilientToolNode([42])``) is refused with a `UsageError` saying what was expected.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_resilient_tools import (
    IgnoredOptionWarning,
    ResilientTool,
    ResilientToolNode,
    RetryPolicy,
    ToolPolicy,
    UsageError,
)
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.tools import CALLS, failing_tool, ok_tool

RETRY = ToolPolicy(retry=RetryPolicy(max_attempts=4, initial_delay=0))
HEDGE = ToolPolicy(hedge=0.05)


def _ours(caught: Any) -> list[str]:
    return [str(w.message) for w in caught if w.category is IgnoredOptionWarning]


def _two_turns(harness: Harness, tool: Any, **policies: Any) -> list[str]:
    """Two runs of one adapter, one call of `tool` each (the middleware is told at the
    first call, the others when built): what it said about ignored options."""
    ais = [AIMessage("", tool_calls=[tool_call(tool.name, {"query": "q"}, id=f"c{i}")]) for i in range(2)]  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        script = [ais[0], AIMessage("done"), ais[1], AIMessage("done")]
        graph = harness.build([tool], script=script, **policies)
        for ai in ais:
            if harness.adapter == "middleware":
                harness.invoke(graph, {"messages": [HumanMessage("go")]})
            else:
                harness.invoke(graph, {"messages": [ai]})
    return [str(w.message) for w in caught if w.category is IgnoredOptionWarning]


def test_a_retry_on_a_tool_not_known_as_a_read_is_said_once(harness: Harness) -> None:
    """``prices`` is not a known read: a write, run once; the retry is said to be
    ignored, once, with the fix."""
    tool = failing_tool("prices", ConnectionError("quotes service unreachable"))
    (text,) = _two_turns(harness, tool, policy=RETRY)
    assert "'prices' is treated as a write" in text
    assert "max_attempts=4" in text and "idempotent=True" in text
    assert CALLS["prices"] == 2  # one attempt per call: the retry did not apply


def test_a_hedge_on_a_write_is_said_once(harness: Harness) -> None:
    tool = ok_tool("prices")
    (text,) = _two_turns(harness, tool, policy=HEDGE)
    assert "'prices' is treated as a write" in text and "hedge=0.05" in text


def test_the_fix_silences_it_and_the_retry_applies(harness: Harness) -> None:
    tool = failing_tool("prices", ConnectionError("quotes service unreachable"))
    fixed = ToolPolicy(idempotent=True, retry=RetryPolicy(max_attempts=4, initial_delay=0))
    result = harness.run([tool], [tool_call("prices", {"query": "q"}, id="c1")], policy=fixed)
    assert result["c1"].status == "error" and CALLS["prices"] == 4


@pytest.mark.parametrize(
    "policy",
    [
        None,  # the defaults: retries and no hedge, never reported
        ToolPolicy(timeout=5),
        ToolPolicy(retry=RetryPolicy(max_attempts=1)),  # nothing to ignore
        ToolPolicy(idempotent=False, retry=RetryPolicy(max_attempts=4)),  # a declared write
        ToolPolicy(retry=RetryPolicy(max_attempts=4, retry_refused_writes=True)),
    ],
    ids=["defaults", "timeout", "one-attempt", "declared-write", "refused-writes"],
)
def test_defaults_and_knowing_settings_are_not_reported(
    harness: Harness, policy: ToolPolicy | None
) -> None:
    """With warnings as errors, any warning fails this test."""
    tool = failing_tool("prices", ConnectionError("down"))
    harness.run([tool], [tool_call("prices", {"query": "q"}, id="c1")], policy=policy)


def test_a_global_retry_is_not_reported_for_a_tool_named_as_a_write() -> None:
    """``create_order`` says it writes: a retry for every tool was never meant for it
    (a wrapper's one policy is often the one every wrapped tool gets)."""
    ResilientToolNode([ok_tool("get_weather"), failing_tool("create_order", ValueError())], policy=RETRY)  # fmt: skip
    ResilientTool.wrap(failing_tool("create_order", ValueError()), policy=RETRY)
    with pytest.warns(IgnoredOptionWarning, match="'prices'"):
        ResilientTool.wrap(ok_tool("prices"), policy=RETRY)


def test_a_retry_set_for_a_write_in_particular_is_reported() -> None:
    tools = [ok_tool("get_weather"), failing_tool("create_order", ValueError())]
    for where in ({"policies": {"create_order": RETRY}}, {"patterns": {"create_*": RETRY}}):
        with pytest.warns(IgnoredOptionWarning, match="'create_order' .*its name says so"):
            ResilientToolNode(tools, **where)


def test_a_hedge_on_a_keyed_write_says_to_remove_it() -> None:
    keyed = ToolPolicy(idempotency_key=True, hedge=0.1)
    with pytest.warns(IgnoredOptionWarning, match="a keyed write.*Remove hedge") as caught:
        ResilientTool.wrap(ok_tool("prices"), policy=keyed)
    assert caught[0].filename == __file__  # it points at the user's line


def test_each_adapter_says_it_once() -> None:
    tool = ok_tool("prices")
    for _ in range(2):
        with pytest.warns(IgnoredOptionWarning) as caught:
            ResilientToolNode([tool], policy=RETRY)
        assert len(_ours(caught)) == 1


# -- a tool that is no tool --------------------------------------------------------------


NOT_TOOLS = [42, "get_weather", functools.partial(print, "x")]


@pytest.mark.parametrize("bad", NOT_TOOLS, ids=["int", "str", "partial"])
def test_the_node_says_what_a_tool_must_be(bad: Any) -> None:
    with pytest.raises(UsageError, match=r"tools\[1\] must be a BaseTool or a function") as exc:
        ResilientToolNode([ok_tool(), bad])
    assert type(bad).__name__ in str(exc.value) or "callable" in str(exc.value)


@pytest.mark.parametrize("bad", NOT_TOOLS, ids=["int", "str", "partial"])
def test_the_wrapper_says_what_a_tool_must_be(bad: Any) -> None:
    with pytest.raises(UsageError, match="must be a BaseTool or a function"):
        ResilientTool.wrap(bad)


def test_the_message_names_what_was_given() -> None:
    with pytest.raises(UsageError) as exc:
        ResilientToolNode([42])
    assert str(exc.value).endswith("got int 42")


@pytest.mark.parametrize("trust", ["trust", "ignore"])
@pytest.mark.parametrize("adapter", ["node", "wrapper"])
def test_a_tools_annotations_decide_what_is_said_when_built(trust: str, adapter: str) -> None:
    """A tool named like neither a read nor a write (``prices``) whose MCP annotations
    declare it read-only: trusted, it is a read and its retry applies (nothing said);
    ignored, it is a write by its name and the retry is said to have no effect."""
    tool = ok_tool("prices")
    tool.metadata = {"readOnlyHint": True, "destructiveHint": None, "idempotentHint": None}
    policy = RETRY.model_copy(update={"annotations": trust})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if adapter == "node":
            ResilientToolNode([tool], policies={"prices": policy})
        else:
            ResilientTool.wrap(tool, policy=policy)
    said = _ours(caught)
    assert (said == []) if trust == "trust" else (len(said) == 1 and "'prices'" in said[0])
