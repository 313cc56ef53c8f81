"""Argument repair: the pure function (tables and properties) and the repair stage
through every adapter, sync and async."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.tools import BaseTool, StructuredTool

from langchain_resilient_tools import Args, ToolPolicy
from langchain_resilient_tools.pipeline.admit import AdmitStage
from langchain_resilient_tools.pipeline.driver import STAGES
from langchain_resilient_tools.pipeline.repair.logic import (
    MAX_REPAIR_CHARS,
    fits,
    repair_call,
    schema_facts,
)
from langchain_resilient_tools.pipeline.repair.stage import RepairStage
from langchain_resilient_tools.pipeline.validate.stage import ValidateStage
from langchain_resilient_tools.testing import invalid_call, tool_call
from tests.conftest import Harness
from tests.tools import CALLS, counted

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "user_id": {"type": "integer"},
        "quantity": {"type": "integer", "minimum": 1},
        "price": {"type": "number"},
        "express": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "filters": {"type": "object"},
        "address": {"type": "string"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "info_to_extract": {"type": "string"},
    },
    "required": ["user_id"],
}
ALIASES = {"info_to_extract": ["desc", "description"]}


def fix(args: Any, **kw: Any) -> tuple[Any, list[str], str | None]:
    r = repair_call(args, SCHEMA, kw.pop("aliases", ALIASES), **kw)
    return r.args, list(r.repairs), r.error


# -- the pure function ---------------------------------------------------------------

REPAIRS = [
    # (input, expected args, expected repairs)
    ({"userId": 5}, {"user_id": 5}, ["renamed 'userId' to 'user_id'"]),
    ({"user-id": 5}, {"user_id": 5}, ["renamed 'user-id' to 'user_id'"]),
    ({"UserID": 5}, {"user_id": 5}, ["renamed 'UserID' to 'user_id'"]),
    ({"user_id": 1, "desc": "x"}, {"user_id": 1, "info_to_extract": "x"},
     ["renamed 'desc' to 'info_to_extract'"]),
    ({"user_id": 1, "adress": "Main St"}, {"user_id": 1, "address": "Main St"},
     ["renamed 'adress' to 'address'"]),
    ({"user_id": " 7 "}, {"user_id": 7}, ["parsed 'user_id' value '7' as an integer"]),
    ({"user_id": 1, "price": "2.5"}, {"user_id": 1, "price": 2.5},
     ["parsed 'price' value '2.5' as a number"]),
    ({"user_id": 1, "express": "TRUE"}, {"user_id": 1, "express": True},
     ["parsed 'express' value 'TRUE' as a boolean"]),
    ({"user_id": 1, "express": "false"}, {"user_id": 1, "express": False},
     ["parsed 'express' value 'false' as a boolean"]),
    ({"user_id": 1, "tags": "red"}, {"user_id": 1, "tags": ["red"]},
     ["parsed 'tags' value 'red' as a list of one item"]),
    ({"user_id": 1, "tags": '["a", "b"]'}, {"user_id": 1, "tags": ["a", "b"]},
     ['parsed \'tags\' value \'["a", "b"]\' as an array']),
    ({"user_id": 1, "filters": '{"k": 1}'}, {"user_id": 1, "filters": {"k": 1}},
     ['parsed \'filters\' value \'{"k": 1}\' as an object']),
    ('{"user_id": 1,}', {"user_id": 1}, ["repaired malformed JSON arguments"]),
    ("{'user_id': 1}", {"user_id": 1}, ["repaired malformed JSON arguments"]),
    ('```json\n{"user_id": 1}\n```', {"user_id": 1}, ["repaired malformed JSON arguments"]),
    ('{"user_id": 1}', {"user_id": 1}, []),
    ("", {}, []),
]  # fmt: skip


@pytest.mark.parametrize(("args", "expected", "repairs"), REPAIRS)
def test_repairs(args: Any, expected: dict[str, Any], repairs: list[str]) -> None:
    assert fix(args) == (expected, repairs, None)


NOT_REPAIRED = [
    # (input, expected args): left for validation to report, never guessed
    ({"user_id": "five"}, {"user_id": "five"}),
    ({"user_id": "5.5"}, {"user_id": "5.5"}),
    ({"user_id": 1, "express": "yes"}, {"user_id": 1, "express": "yes"}),
    ({"user_id": 1, "note": None}, {"user_id": 1, "note": None}),
    ({"user_id": 1, "note": "5"}, {"user_id": 1, "note": "5"}),  # a string field stays a string
    ({"user_id": True}, {"user_id": True}),
]


@pytest.mark.parametrize(("args", "expected"), NOT_REPAIRED)
def test_no_guessing(args: dict[str, Any], expected: dict[str, Any]) -> None:
    assert fix(args) == (expected, [], None)


def test_a_given_argument_is_never_overwritten() -> None:
    r = repair_call({"user_id": 2, "userId": 1}, SCHEMA)
    assert r.args == {"user_id": 2, "userId": 1} and r.unknown == ("userId",)
    assert r.repairs == ()


def test_ambiguous_spelling_is_not_guessed() -> None:
    schema = {"type": "object", "properties": {"user_name": {}, "user_game": {}}}
    r = repair_call({"user_nme": "x"}, schema)
    assert r.args == {"user_nme": "x"} and r.unknown == ("user_nme",) and r.repairs == ()


def test_spelling_only_fills_a_missing_field() -> None:
    r = repair_call({"address": "a", "adress": "b", "user_id": 1}, SCHEMA)
    assert r.args == {"address": "a", "adress": "b", "user_id": 1}
    assert r.unknown == ("adress",)


def test_unknown_args_are_kept_for_validation_by_default() -> None:
    r = repair_call({"user_id": 1, "bogus": 2}, SCHEMA)
    assert r.args == {"user_id": 1, "bogus": 2} and r.repairs == () and r.unknown == ("bogus",)


def test_unknown_args_drop_drops_and_reports_them() -> None:
    r = repair_call({"user_id": 1, "bogus": 2}, SCHEMA, unknown_args="drop")
    assert r.args == {"user_id": 1} and r.repairs == ("dropped unknown argument 'bogus'",)
    assert r.dropped == ("bogus",)


def test_open_schema_keeps_extra_arguments() -> None:
    schema = {**SCHEMA, "additionalProperties": True}
    assert repair_call({"user_id": 1, "extra": 2}, schema).args == {"user_id": 1, "extra": 2}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"user_id": 1, "address": "Main', "unclosed string"),
        ('{"user_id": 1, "tags": ["a", "b"', "closing ']}'"),
        ('{"user_id": 12', "closing '}'"),
        ('{"user_id": 1} and more', "more text after"),
        ("[1, 2]", "not a JSON object"),
        ("user_id=1", "not a JSON object"),
        ("{" + "x" * MAX_REPAIR_CHARS, "too long"),
    ],
)
def test_refusals(raw: str, reason: str) -> None:
    args, repairs, error = fix(raw)
    assert args is None and repairs == []
    assert error is not None and reason in error


def test_input_is_not_mutated() -> None:
    args = {"userId": "5", "tags": "a"}
    fix(args)
    assert args == {"userId": "5", "tags": "a"}


# -- properties ----------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
NAMES = st.sampled_from(
    [*SCHEMA["properties"], "userId", "USER-ID", "desc", "adress", "zzz", "Tags"]
)
ARGS = st.dictionaries(NAMES | st.text(max_size=10), JSON | st.sampled_from(["5", " 7 ", "TRUE", "[1]", '{"a": 1}']), max_size=6)  # fmt: skip
FACTS = schema_facts(SCHEMA)


@settings(max_examples=300, deadline=None)
@given(args=ARGS | st.text(max_size=40) | JSON.map(json.dumps))
def test_never_raises_and_is_idempotent(args: Any) -> None:
    first = repair_call(args, FACTS, ALIASES)
    if first.args is None:
        assert first.error
        return
    again = repair_call(first.args, FACTS, ALIASES)
    assert again.args == first.args
    assert again.repairs == ()


@settings(max_examples=300, deadline=None)
@given(args=ARGS)
def test_fits_only_when_the_full_repair_changes_nothing(args: dict[str, Any]) -> None:
    """When the fast check the stage uses says 'nothing to repair', the full repair
    (without aliases) leaves the arguments as they are (the check may be cautious the
    other way: then the full repair runs and decides)."""
    full = repair_call(args, FACTS)
    if fits(args, FACTS):
        assert full.args == args and full.repairs == ()


VALID = st.fixed_dictionaries(
    {"user_id": st.integers()},
    optional={
        "quantity": st.integers(),
        "price": st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
        "express": st.booleans(),
        "tags": st.lists(st.text(max_size=5)),
        "filters": st.dictionaries(st.text(max_size=5), st.integers()),
        "address": st.text(),
        "note": st.none() | st.text(),
    },
)


@given(args=VALID)
def test_valid_calls_are_untouched(args: dict[str, Any]) -> None:
    r = repair_call(args, FACTS, ALIASES)
    assert r.args == args and r.repairs == () and r.error is None
    assert fits(args, FACTS)  # the stage's fast path takes them
    assert repair_call(json.dumps(args), FACTS).args == args  # strict JSON: no repair


def test_stage_order() -> None:
    order = list(STAGES)
    assert order.index(RepairStage) < order.index(AdmitStage) < order.index(ValidateStage)
    assert order.index(ValidateStage) == order.index(AdmitStage) + 1


# -- through every adapter -----------------------------------------------------------


def order_tool() -> BaseTool:
    def create_order(user_id: int, quantity: int = 1, tags: list[str] | None = None) -> str:
        return f"order for {user_id}: {quantity} x {','.join(tags or [])}"

    return counted("create_order", create_order)


def mcp_tool() -> BaseTool:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    }

    def run(**kw: Any) -> str:
        CALLS["search_docs"] += 1
        return f"{kw['query']}:{kw.get('limit')}:{type(kw.get('limit')).__name__}"

    return StructuredTool(name="search_docs", description="Search.", args_schema=schema, func=run)


SCENARIOS = [
    # (id, tool, args, invalid raw text or None, expected content, repairs)
    ("rename-case", order_tool, {"userId": 5}, None, "order for 5: 1 x ",
     ["renamed 'userId' to 'user_id'"]),
    ("alias", order_tool, {"user_id": 5, "qty": 2}, None, "order for 5: 2 x ",
     ["renamed 'qty' to 'quantity'"]),
    ("spelling", order_tool, {"user_id": 5, "quantiy": 3}, None, "order for 5: 3 x ",
     ["renamed 'quantiy' to 'quantity'"]),
    ("numeric-string", order_tool, {"user_id": " 5 "}, None, "order for 5: 1 x ",
     ["parsed 'user_id' value '5' as an integer"]),
    ("single-to-list", order_tool, {"user_id": 5, "tags": "red"}, None, "order for 5: 1 x red",
     ["parsed 'tags' value 'red' as a list of one item"]),
    ("json-string-list", order_tool, {"user_id": 5, "tags": '["a","b"]'}, None,
     "order for 5: 1 x a,b", ['parsed \'tags\' value \'["a","b"]\' as an array']),
    ("broken-json", order_tool, None, "{'user_id': 5, 'quantity': 2,}", "order for 5: 2 x ",
     ["repaired malformed JSON arguments"]),
    ("broken-json-and-name", order_tool, None, "{userId: 5}", "order for 5: 1 x ",
     ["repaired malformed JSON arguments", "renamed 'userId' to 'user_id'"]),
    ("dict-schema-type", mcp_tool, {"Query": "q", "limit": "3"}, None, "q:3:int",
     ["renamed 'Query' to 'query'", "parsed 'limit' value '3' as an integer"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "args", "raw", "content", "repairs"),
    [s[1:] for s in SCENARIOS],
    ids=[s[0] for s in SCENARIOS],
)
def test_repair_scenarios(
    harness: Harness,
    make: Any,
    args: dict[str, Any] | None,
    raw: str | None,
    content: str,
    repairs: list[str],
) -> None:
    tool = make()
    if raw is not None and harness.adapter == "tool":
        pytest.skip("invalid calls never reach a tool; the node and middleware answer them")
    # "drop": the table's repairs include dropping an unknown argument (the default rejects)
    policy = ToolPolicy(args=Args(aliases={"quantity": ["qty"]}, unknown="drop"))
    calls = [tool_call(tool.name, args, id="c1")] if raw is None else []
    bad = [invalid_call(tool.name, raw, id="c1")] if raw is not None else []
    result = harness.run([tool], calls, invalid_tool_calls=bad, policy=policy)
    message = result["c1"]
    assert message.status == "success", message.content
    note, _, body = str(message.content).partition("\n")
    assert body == content
    assert note.startswith("[Note: some arguments were read differently")
    for repair in repairs:
        assert repair in note
    assert message.response_metadata["resilience"]["repairs"] == repairs
    assert CALLS[tool.name] == 1
    assert len(result.messages) == 1 and result.tool_errors == []


def test_valid_call_gets_no_notice(harness: Harness) -> None:
    result = harness.run([order_tool()], [tool_call("create_order", {"user_id": 5}, id="c1")])
    assert result["c1"].content == "order for 5: 1 x "
    assert "resilience" not in result["c1"].response_metadata  # untouched: no record


def two_quantities(user_id: int, quantity_a: int = 0, quantity_b: int = 0) -> str:
    return f"{quantity_a}{quantity_b}"


def two_quantities_tool() -> BaseTool:
    return counted("create_order", two_quantities)


REFUSALS = [
    # (id, tool, args, invalid raw text or None, error, field problems)
    ("truncated-json", order_tool, None, '{"user_id": 5, "tags": ["re', "malformed_call", []),
    ("five", order_tool, {"user_id": "five"}, None, "invalid_arguments", ["wrong_type"]),
    ("ambiguous-spelling", two_quantities_tool, {"user_id": 5, "quantity_": 1}, None,
     "invalid_arguments", ["unexpected"]),
    ("unknown", order_tool, {"user_id": 5, "color": "red"}, None, "invalid_arguments",
     ["unexpected"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "args", "raw", "error", "problems"),
    [r[1:] for r in REFUSALS],
    ids=[r[0] for r in REFUSALS],
)
def test_refusal_scenarios(
    harness: Harness,
    make: Any,
    args: dict[str, Any] | None,
    raw: str | None,
    error: str,
    problems: list[str],
) -> None:
    if raw is not None and harness.adapter == "tool":
        pytest.skip("invalid calls never reach a tool; the node and middleware answer them")
    calls = [tool_call("create_order", args, id="c1")] if raw is None else []
    bad = [invalid_call("create_order", raw, id="c1")] if raw is not None else []
    result = harness.run([make()], calls, invalid_tool_calls=bad)
    data = json.loads(result["c1"].content)
    assert result["c1"].status == "error" and data["error"] == error
    assert CALLS["create_order"] == 0
    assert "create_order(user_id: integer" in data["suggestion"]
    if error == "malformed_call":
        assert "cut off" in data["message"]
    else:
        assert [f["problem"] for f in data["fields"]] == problems
    if "unexpected" in problems:
        assert "renamed" not in data["message"] and "is not a parameter" in data["message"]


def test_unknown_args_drop_drops_and_tells(harness: Harness) -> None:
    """``unknown_args="drop"``, the old default, still runs the call without the argument
    and tells the model so."""
    call = tool_call("create_order", {"user_id": 5, "color": "red"}, id="c1")
    result = harness.run([order_tool()], [call], policy=ToolPolicy(args=Args(unknown="drop")))
    note, _, body = str(result["c1"].content).partition("\n")
    assert body == "order for 5: 1 x " and "dropped unknown argument 'color'" in note
    assert CALLS["create_order"] == 1


# -- the wrapper called with plain arguments -------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_plain_call_keeps_the_tools_own_value_when_arguments_were_repaired(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No ToolMessage exists for a plain call, so the repair note is logged, and the
    value keeps its type (a dict stays a dict); with a ToolCall the note is shown."""
    import asyncio
    import logging

    from langchain_core.tools import tool

    from langchain_resilient_tools import ResilientTool

    @tool
    def get_forecast(city: str, days: int) -> dict[str, Any]:
        """A forecast."""
        return {"city": city, "days": days}

    wrapped = ResilientTool.wrap(get_forecast)
    args = {"City": "Oslo", "days": "3"}
    with caplog.at_level(logging.INFO, logger="langchain_resilient_tools"):
        value = wrapped.invoke(args) if mode == "sync" else asyncio.run(wrapped.ainvoke(args))
    assert value == {"city": "Oslo", "days": 3}
    assert any("renamed 'City' to 'city'" in r.getMessage() for r in caplog.records)
    message = wrapped.invoke(tool_call("get_forecast", args, id="t1"))
    assert "renamed 'City' to 'city'" in str(message.content)
