"""Policies are validated at construction and resolved per tool."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from langchain_resilient_tools import RetryPolicy, ToolPolicy
from langchain_resilient_tools.core.ignored import name_says
from langchain_resilient_tools.core.policy import PolicyResolver, infer_idempotent, name_words


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("get_weather", True),
        ("search_web", True),
        ("listFiles", True),
        ("lookup_user", True),
        ("look_up_user", True),
        ("create_order", False),
        ("deleteFile", False),
        ("send-email", False),
        ("book_flight", False),
        ("weather", False),  # unknown: not retried
        ("getaway_booking", False),  # a prefix is a whole word, not a substring
    ],
)
def test_idempotency_inferred_from_name(name: str, expected: bool) -> None:
    assert infer_idempotent(name) is expected


@pytest.mark.parametrize(
    ("name", "words", "says"),
    [
        ("create.file", ["create", "file"], "write"),
        ("createFile", ["create", "file"], "write"),
        ("create-file", ["create", "file"], "write"),
        ("CreateFile", ["create", "file"], "write"),
        ("create file", ["create", "file"], "write"),
        ("get_user", ["get", "user"], "read"),
        ("getUser", ["get", "user"], "read"),
        ("get.user", ["get", "user"], "read"),
        ("look_up-user", ["look", "up", "user"], "read"),
        ("__prices__", ["prices"], ""),
    ],
)
def test_every_tool_name_rule_reads_the_same_words(name: str, words: list[str], says: str) -> None:
    """One split for every rule (`name_words`): idempotency inferred from the name and what
    the name says when an option is ignored (`create.file` once said nothing there)."""
    assert name_words(name) == words
    assert infer_idempotent(name) is (says == "read")
    assert name_says(name) == says


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout": 0},
        {"timeout": -1},
        {"max_result_chars": 0},
        {"retry": {"max_attempts": 0}},
        {"aliases": {"city": ["city"]}},
        {"aliases": {"a": ["x"], "b": ["x"]}},
        {"result_checks": ["not callable"]},
        {"on_low_quality": "ignore"},
        {"dedup": "sometimes"},
        {"no_such_field": 1},
    ],
)
def test_bad_configuration_fails_at_construction(kwargs: dict[str, object]) -> None:
    with pytest.raises((ValidationError, ValueError)):
        ToolPolicy(**kwargs)  # type: ignore[arg-type]


def test_retry_policy_validation() -> None:
    with pytest.raises((ValidationError, ValueError)):
        RetryPolicy(initial_delay=5, max_delay=1)
    with pytest.raises((ValidationError, ValueError)):
        RetryPolicy(retry_on="ValueError")  # type: ignore[arg-type]
    assert RetryPolicy(retry_on=lambda e: True).retry_on is not None
    assert RetryPolicy(retry_on=(KeyError, OSError)).retry_on == (KeyError, OSError)


def test_policies_are_frozen_and_keyword_only() -> None:
    policy = ToolPolicy()
    with pytest.raises(ValidationError):
        policy.timeout = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        ToolPolicy(5)  # type: ignore[misc]


def test_per_tool_policy_overrides_only_fields_it_sets() -> None:
    resolver = PolicyResolver(
        ToolPolicy(timeout=3, retry=RetryPolicy(max_attempts=5)),
        {"create_order": ToolPolicy(timeout=60)},
    )
    own = resolver.resolve("create_order")
    assert own.policy.timeout == 60
    assert own.policy.retry.max_attempts == 5
    assert own.idempotent is False
    other = resolver.resolve("get_x")
    assert other.policy.timeout == 3 and other.idempotent is True
    assert resolver.resolve("get_x") is other  # cached


def test_resolver_rejects_wrong_types() -> None:
    with pytest.raises(ValueError):
        PolicyResolver({"timeout": 3})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PolicyResolver(None, {"x": {"timeout": 3}})  # type: ignore[dict-item]


# -- configuration mistakes fail before the first call, with the fix --------------------


def test_misspelt_policy_name_fails_at_node_construction() -> None:
    from langchain_resilient_tools import ResilientToolNode
    from langchain_resilient_tools.core.errors import UsageError
    from tests.tools import ok_tool

    tools = [ok_tool("get_weather"), ok_tool("search_docs")]
    with pytest.raises(UsageError) as info:
        ResilientToolNode(tools, policies={"get_wether": ToolPolicy(timeout=3)})
    text = str(info.value)
    assert "policies['get_wether']" in text
    assert "Did you mean 'get_weather'?" in text
    assert "get_weather, search_docs" in text
    ResilientToolNode(tools, policies={"get_weather": ToolPolicy(timeout=3)})  # fine


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_misspelt_policy_name_fails_on_the_middleware_first_call(mode: str) -> None:
    import asyncio

    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    from langchain_resilient_tools import ResilientToolsMiddleware
    from langchain_resilient_tools.core.errors import UsageError
    from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
    from tests.tools import CALLS, ok_tool

    ai = AIMessage("", tool_calls=[tool_call("get_weather", {"city": "x"}, id="c1")])
    agent = create_agent(
        ScriptedChatModel(script=[ai, AIMessage("done")]),
        tools=[ok_tool()],
        middleware=[ResilientToolsMiddleware(policies={"get_wether": ToolPolicy(timeout=3)})],
    )
    payload = {"messages": [HumanMessage("hi")]}
    with pytest.raises(UsageError, match="Did you mean 'get_weather'"):
        if mode == "sync":
            agent.invoke(payload)
        else:
            asyncio.run(agent.ainvoke(payload))
    assert CALLS["get_weather"] == 0
