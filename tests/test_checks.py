"""Result checks: the built-ins, and each on_low_quality action through every adapter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from langchain_resilient_tools import ResilientTool, ResultChecks, RetryPolicy, ToolPolicy
from langchain_resilient_tools.checks import (
    empty_field,
    empty_result,
    error_prefix,
    mcp_is_error,
)
from langchain_resilient_tools.pipeline.checks import first_reason
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.tools import CALLS, counted

# -- the built-ins ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   \n", [], {}, "[]", "{}", "null", ' "" '])
def test_empty_result_fires(value: Any) -> None:
    assert empty_result(value) == "the result is empty"


@pytest.mark.parametrize("value", ["x", [1], {"a": 1}, 0, False, "[0]", '{"a": null}'])
def test_empty_result_passes(value: Any) -> None:
    assert empty_result(value) is None


def test_empty_field() -> None:
    check = empty_field("organic")
    assert check('{"organic": [], "ads": [1]}') == "the 'organic' field of the result is empty"
    assert check({"ads": [1]}) == "the result has no 'organic' field"
    assert check('{"organic": [{"title": "t"}]}') is None
    assert check("plain text is not judged") is None
    nested = empty_field("data.items.0.title")
    assert nested({"data": {"items": [{"title": " "}]}}) is not None
    assert nested({"data": {"items": [{"title": "ok"}]}}) is None
    assert nested({"data": {"items": []}}) is not None
    blocks = [{"type": "text", "text": '{"organic": []}'}]
    assert check(blocks) is not None
    with pytest.raises(ValueError):
        empty_field("")


def test_error_prefix() -> None:
    default = error_prefix()
    assert default("Unknown tool: foo") is not None
    assert default("  Error executing tool search: boom") is not None
    assert default("Error: quota") is not None
    assert default("No error here") is None
    assert default({"Error:": 1}) is None
    custom = error_prefix("FAIL")
    assert custom("FAIL: x") is not None and custom("Error: x") is None


def test_mcp_is_error() -> None:
    class Result:
        isError = True
        content = ()

    assert mcp_is_error({"content": [], "isError": True}) is not None
    assert mcp_is_error('{"content": [], "isError": true}') is not None
    assert mcp_is_error(Result()) is not None
    assert mcp_is_error({"content": [], "isError": False}) is None
    message = ToolMessage("text", tool_call_id="1", artifact={"isError": True})
    assert mcp_is_error(message) is not None
    assert mcp_is_error(ToolMessage("fine", tool_call_id="1")) is None


def test_user_check_and_a_broken_check() -> None:
    def too_short(content: Any) -> str | None:
        return "too short" if len(str(content)) < 3 else None

    def broken(content: Any) -> str | None:
        raise RuntimeError("bug in a check")

    assert first_reason([broken, too_short], "ab") == "too short"
    assert first_reason([broken, too_short], "abcdef") is None
    assert first_reason([too_short], ToolMessage("x", tool_call_id="1")) == "too short"


# -- every built-in check x every action, through every adapter --------------------------

CASES: dict[str, tuple[Any, Any]] = {
    "empty_result": (empty_result, lambda query: []),
    "empty_field": (empty_field("organic"), lambda query: '{"organic": [], "ads": ["buy"]}'),
    "error_prefix": (
        error_prefix(),
        lambda query: "Error: quota exceeded for api_key=abc123secret",
    ),
    "mcp_is_error": (
        mcp_is_error,
        lambda query: {"content": [{"type": "text", "text": "boom"}], "isError": True},
    ),
}


@pytest.mark.parametrize("action", ["retry", "feedback", "rollback"])
@pytest.mark.parametrize("case", list(CASES))
def test_check_fires_with_each_action(harness: Harness, case: str, action: str) -> None:
    check, fn = CASES[case]
    policy = ToolPolicy(
        result_checks=[check],
        on_low_quality=action,
        retry=RetryPolicy(max_attempts=3),
    )
    result = harness.run(
        [counted("search_web", fn)],
        [tool_call("search_web", {"query": "q"}, id="c1")],
        policy=policy,
    )
    assert CALLS["search_web"] == (3 if action == "retry" else 1)
    if action == "rollback" and harness.adapter != "tool":
        messages = result.state["messages"]
        assert not any(isinstance(m, ToolMessage) for m in messages)
        assert not any(isinstance(m, AIMessage) and m.tool_calls for m in messages)
        notes = [m for m in messages if isinstance(m, HumanMessage) and "[Tool note]" in m.text]
        assert len(notes) == 1 and "search_web" in notes[0].text
        assert result.state["tool_ledger"]["rollbacks"] == 1
    else:  # feedback (also what retry falls through to, and rollback outside a graph)
        message = result["c1"]
        data = json.loads(str(message.content))
        assert message.status == "error"
        assert data["error"] == "low_quality_result"
        assert data["attempts"] == (3 if action == "retry" else 1)
        assert "not useful" in data["message"]
        assert data["preview"] == {"empty_result": "[]"}.get(case, data["preview"])
        assert data["preview"]
        assert "abc123secret" not in message.content
    if harness.adapter != "tool":
        assert [r["error"] for r in result.tool_errors] == ["low_quality_result"]


# -- an explicit check wins over the default error-text detection -----------------------

UPSTREAM_ERROR = "Error executing tool lookup: upstream answered 502"


def _upstream_error(query: str) -> str:
    return UPSTREAM_ERROR


async def _aupstream_error(query: str) -> str:
    return UPSTREAM_ERROR


def _explicit_check_policy(order: str, action: str) -> ToolPolicy:
    """Both orders of configuring the check beside the default detection."""
    if order == "check-first":  # the explicit check first, the detection left implicit
        return ToolPolicy(
            result_checks=[error_prefix(), empty_result],
            on_low_quality=action,
            idempotent=True,
            retry=RetryPolicy(max_attempts=3),
        )
    return ToolPolicy(  # the detection set explicitly, first; the check last in the list
        results=ResultChecks(detect_error_text=True),
        idempotent=True,
        retry=RetryPolicy(max_attempts=3),
        on_low_quality=action,
        result_checks=[empty_result, error_prefix()],
    )


@pytest.mark.parametrize("action", ["retry", "feedback", "rollback"])
@pytest.mark.parametrize("order", ["check-first", "detection-first"])
def test_an_explicit_check_wins_over_error_text_detection(
    harness: Harness, order: str, action: str
) -> None:
    tool = counted("lookup", _upstream_error, coroutine=_aupstream_error)
    result = harness.run(
        [tool],
        [tool_call("lookup", {"query": "q"}, id="c1")],
        policy=_explicit_check_policy(order, action),
    )
    assert CALLS["lookup"] == (3 if action == "retry" else 1)
    if action == "rollback" and harness.adapter != "tool":
        messages = result.state["messages"]
        assert not any(isinstance(m, ToolMessage) for m in messages)
        assert result.state["tool_ledger"]["rollbacks"] == 1
    else:
        data = json.loads(str(result["c1"].content))
        assert data["error"] == "low_quality_result"
        assert data["attempts"] == (3 if action == "retry" else 1)
        assert "starts with 'Error executing tool'" in data["message"]
    if harness.adapter != "tool":
        assert [r["error"] for r in result.tool_errors] == ["low_quality_result"]


def test_error_text_detection_still_answers_what_no_check_flags(harness: Harness) -> None:
    tool = counted("lookup", _upstream_error, coroutine=_aupstream_error)
    policy = ToolPolicy(
        result_checks=[empty_result], on_low_quality="retry", idempotent=True
    )  # a check that does not fire: the default detection still applies
    result = harness.run([tool], [tool_call("lookup", {"query": "q"}, id="c1")], policy=policy)
    data = json.loads(str(result["c1"].content))
    assert data["error"] == "tool_error"
    assert "upstream answered 502" in data["message"]
    assert CALLS["lookup"] == 1  # a reported error is not retried
    relaxed = ToolPolicy(
        result_checks=[empty_result], results=ResultChecks(detect_error_text=False)
    )
    result = harness.run([tool], [tool_call("lookup", {"query": "r"}, id="c2")], policy=relaxed)
    assert result["c2"].content == UPSTREAM_ERROR and result["c2"].status == "success"


def test_retry_never_reruns_a_write(harness: Harness) -> None:
    tool = counted("create_ticket", lambda query: "")
    policy = ToolPolicy(result_checks=[empty_result], on_low_quality="retry")
    result = harness.run(
        [tool], [tool_call("create_ticket", {"query": "q"}, id="c1")], policy=policy
    )
    assert CALLS["create_ticket"] == 1
    assert json.loads(str(result["c1"].content))["error"] == "low_quality_result"


def test_retry_stops_when_the_result_gets_useful(harness: Harness) -> None:
    answers = iter(["", "", "found it"])
    tool = counted("search_web", lambda query: next(answers))
    policy = ToolPolicy(result_checks=[empty_result], on_low_quality="retry")
    result = harness.run([tool], [tool_call("search_web", {"query": "q"}, id="c1")], policy=policy)
    assert result["c1"].content == "found it"
    assert CALLS["search_web"] == 3
    assert result.tool_errors == []


def test_mcp_artifact_checked_on_the_tool_message() -> None:
    def fn(query: str) -> tuple[str, dict[str, Any]]:
        return "partial text", {"isError": True}

    tool = StructuredTool.from_function(
        func=fn, name="search_mcp", description="d", response_format="content_and_artifact"
    )
    wrapped = ResilientTool.wrap(tool, policy=ToolPolicy(result_checks=[mcp_is_error]))
    message = wrapped.invoke(tool_call("search_mcp", {"query": "q"}, id="1"))
    assert json.loads(message.content)["error"] == "low_quality_result"
