"""Name-pattern defaults: built-in < policy < most specific pattern < policies[name]."""

from __future__ import annotations

import json

import pytest

from langchain_resilient_tools import ResilientTool, RetryPolicy, ToolPolicy
from langchain_resilient_tools.core.policy import PolicyResolver, pattern_specificity
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.tools import CALLS, flaky_tool

PATTERNS = {
    "search_*": ToolPolicy(timeout=10),
    "create_*": ToolPolicy(timeout=30, idempotent=False),
}


def test_resolution_order() -> None:
    resolver = PolicyResolver(
        ToolPolicy(timeout=20, max_result_chars=500),
        {"search_web": ToolPolicy(timeout=5), "create_payment": ToolPolicy(idempotency_key=True)},
        patterns=PATTERNS,
    )
    web, docs, pay, order = (
        resolver.resolve(n).policy
        for n in ("search_web", "search_docs", "create_payment", "create_order")
    )
    other = resolver.resolve("get_weather").policy
    assert (web.timeout, docs.timeout, pay.timeout, other.timeout) == (5, 10, 30, 20)
    # Fields nobody sets keep the global value, and below it the built-in default.
    assert {p.max_result_chars for p in (web, docs, pay, order, other)} == {500}
    assert {p.retry.max_attempts for p in (web, docs, pay, order, other)} == {3}
    # The per-tool key overrides the pattern's idempotent=False; the pattern alone does not.
    assert resolver.resolve("create_payment").idempotent is True
    assert resolver.resolve("create_order").idempotent is False


def test_pattern_overrides_only_the_fields_it_sets() -> None:
    resolver = PolicyResolver(
        ToolPolicy(timeout=3, idempotent=True), patterns={"get_*": ToolPolicy(dedup="off")}
    )
    policy = resolver.resolve("get_quote").policy
    assert (policy.timeout, policy.idempotent, policy.dedup.mode) == (3, True, "off")


def test_most_specific_pattern_wins_and_ties_keep_order() -> None:
    patterns = {
        "*": ToolPolicy(timeout=1),
        "search_*": ToolPolicy(timeout=2),
        "search_docs*": ToolPolicy(timeout=3),
        "*_docs": ToolPolicy(timeout=4),
        "search_doc?": ToolPolicy(timeout=5),
    }
    resolver = PolicyResolver(patterns=patterns)
    timeouts = {n: resolver.resolve(n).policy.timeout for n in ("search_docs", "search_web", "x")}
    # "search_docs*" (11 literals) beats "search_doc?" (10), "search_*" (7), "*_docs" (5).
    assert timeouts == {"search_docs": 3, "search_web": 2, "x": 1}
    tie = PolicyResolver(patterns={"a*": ToolPolicy(timeout=1), "*a": ToolPolicy(timeout=2)})
    assert tie.pattern_for("aa") == "a*"
    assert pattern_specificity("get_[abc]x*") == 5


def test_patterns_are_case_sensitive_fnmatch() -> None:
    resolver = PolicyResolver(patterns=PATTERNS)
    assert resolver.pattern_for("search_docs") == "search_*"
    assert resolver.pattern_for("research_docs") is None
    assert resolver.pattern_for("Search_docs") is None
    assert resolver.resolve("research_docs").policy.timeout == ToolPolicy().timeout


@pytest.mark.parametrize(
    "patterns", [{"": ToolPolicy()}, {"get_*": {"timeout": 3}}], ids=["empty", "not-a-policy"]
)
def test_bad_patterns_are_rejected(patterns: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="patterns"):
        PolicyResolver(patterns=patterns)  # type: ignore[arg-type]


def test_resilient_tool_takes_patterns() -> None:
    tool = ResilientTool.wrap(
        flaky_tool("send_ping", failures=0),
        policy=ToolPolicy(max_result_chars=50),
        patterns={"send_*": ToolPolicy(idempotent=True, max_result_chars=10)},
    )
    resolved = tool.pipeline.resolver.resolve("send_ping")
    assert resolved.idempotent is True and resolved.policy.output.max_chars == 50


def test_patterns_through_every_adapter(harness: Harness) -> None:
    tools = [flaky_tool("send_ping", failures=1), flaky_tool("send_email", failures=1)]
    result = harness.run(
        tools,
        [
            tool_call("send_ping", {"query": "a"}, id="ping"),
            tool_call("send_email", {"query": "b"}, id="email"),
        ],
        patterns={"send_*": ToolPolicy(idempotent=True)},
        policies={"send_email": ToolPolicy(idempotent=False)},
    )
    assert result["ping"].status == "success"  # the pattern made it safe to retry
    assert json.loads(str(result["email"].content))["error"] == "unknown_outcome"
    assert (CALLS["send_ping"], CALLS["send_email"]) == (2, 1)


def test_pattern_retry_settings(harness: Harness) -> None:
    result = harness.run(
        [flaky_tool("search_docs", failures=10)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=ToolPolicy(retry=RetryPolicy(max_attempts=4)),
        patterns={"search_*": ToolPolicy(retry=RetryPolicy(max_attempts=2))},
    )
    assert json.loads(str(result["c1"].content))["attempts"] == 2
    assert CALLS["search_docs"] == 2
