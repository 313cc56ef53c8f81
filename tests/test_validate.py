"""Validation feedback: every problem per field, for pydantic and plain JSON Schema tools,
unit-tested and through every adapter, sync and async."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import InjectedState
from pydantic import BaseModel, Field, ValidationError, model_validator

from langchain_resilient_tools import Args, ToolPolicy
from langchain_resilient_tools.core.call import CallRecord
from langchain_resilient_tools.core.errors import ToolRaised
from langchain_resilient_tools.core.policy import PolicyResolver
from langchain_resilient_tools.pipeline.driver import Pipeline
from langchain_resilient_tools.pipeline.schema import compile_tool
from langchain_resilient_tools.pipeline.validate.logic import check
from langchain_resilient_tools.testing import invalid_call, tool_call
from langchain_resilient_tools.text.classify import classify
from langchain_resilient_tools.text.fields import PROBLEMS, from_pydantic
from tests.conftest import Harness
from tests.tools import CALLS, counted


class Booking(BaseModel):
    room: Literal["single", "double"]
    nights: int = Field(ge=1, le=30)
    start_day: int = 1
    end_day: int = 2
    guest: str = ""

    @model_validator(mode="after")
    def _order(self) -> Booking:
        if self.end_day <= self.start_day:
            raise ValueError("end_day must be after start_day")
        return self


def book_room(room: str, nights: int, start_day: int = 1, end_day: int = 2, guest: str = "") -> str:
    CALLS["book_room"] += 1
    return f"booked {room} for {nights}"


def booking_tool() -> BaseTool:
    return StructuredTool.from_function(
        book_room, name="book_room", description="Book a room.", args_schema=Booking
    )


def dict_tool() -> BaseTool:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "mode": {"enum": ["fast", "deep"]},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def run(**kw: Any) -> str:
        CALLS["search_docs"] += 1
        return "found"

    return StructuredTool(name="search_docs", description="Search.", args_schema=schema, func=run)


def notes_tool() -> BaseTool:
    def get_notes(topic: int, state: Annotated[dict[str, Any], InjectedState]) -> str:
        """Notes on a topic."""
        return "notes"

    return counted("get_notes", get_notes)


def fields_of(tool: BaseTool, args: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    return check(compile_tool(tool), args, reject_unknown=kw.get("reject", False))


# -- unit ----------------------------------------------------------------------------


def test_every_problem_listed_with_its_sentence() -> None:
    fields = fields_of(booking_tool(), {"room": "suite", "nights": "five"})
    assert fields == [
        {
            "name": "room",
            "problem": "invalid",
            "expected": "one of 'single', 'double'",
            "received": "'suite'",
            "message": "Argument 'room' is not valid (expected one of 'single', 'double'); "
            "received 'suite'.",
        },
        {
            "name": "nights",
            "problem": "wrong_type",
            "expected": "an integer >= 1 and <= 30",
            "received": "'five'",
            "message": "Argument 'nights' expected an integer >= 1 and <= 30, but received 'five'.",
        },
    ]


def test_missing_out_of_range_and_cross_field() -> None:
    missing = fields_of(booking_tool(), {"nights": 2})
    assert [(f["name"], f["problem"], f["received"]) for f in missing] == [
        ("room", "missing", None)
    ]
    assert (
        missing[0]["message"]
        == "Argument 'room' is required (one of 'single', 'double'), but it was not given."
    )
    rng = fields_of(booking_tool(), {"room": "single", "nights": 99})
    assert [(f["problem"], f["received"]) for f in rng] == [("out_of_range", "99")]
    cross = fields_of(booking_tool(), {"room": "single", "nights": 1, "start_day": 5, "end_day": 1})
    assert [f["problem"] for f in cross] == ["cross_field"]
    assert (
        cross[0]["message"] == "The arguments do not fit together: end_day must be after start_day."
    )


def test_cross_field_message_is_never_empty() -> None:
    fields = from_pydantic([{"type": "value_error", "loc": (), "msg": "", "input": {}}], {})
    assert fields[0]["problem"] == "cross_field" and len(fields[0]["message"]) > 30


def test_received_values_are_masked_and_truncated() -> None:
    secret = "sk-live-abcdef1234567890abcdef"
    fields = fields_of(booking_tool(), {"room": f"token={secret}", "nights": "x" * 500})
    text = json.dumps(fields)
    assert secret not in text
    assert all(len(f["received"]) <= 80 for f in fields)


def test_dict_schema_tool_is_validated() -> None:
    fields = fields_of(dict_tool(), {"query": "", "limit": "ten", "mode": "slow", "extra": 1})
    got = {(f["name"], f["problem"]) for f in fields}
    assert got == {
        ("query", "out_of_range"),
        ("limit", "wrong_type"),
        ("mode", "invalid"),
        ("extra", "unexpected"),
    }
    assert fields_of(dict_tool(), {"limit": 3})[0]["problem"] == "missing"
    assert fields_of(dict_tool(), {"query": "x", "limit": 3}) == []


def test_reject_unknown_reports_unexpected() -> None:
    fields = fields_of(booking_tool(), {"room": "single", "nights": 1, "x": 1}, reject=True)
    assert [(f["name"], f["problem"]) for f in fields] == [("x", "unexpected")]
    assert fields_of(booking_tool(), {"room": "single", "nights": 1, "x": 1}) == []


def test_injected_arguments_never_appear() -> None:
    tool = notes_tool()
    assert [f["name"] for f in fields_of(tool, {})] == ["topic"]
    # A validation error raised by the tool itself names no injected argument either.
    try:
        tool.args_schema.model_validate({})  # type: ignore[union-attr]
    except ValidationError as exc:
        error = exc
    pipeline = Pipeline(PolicyResolver())
    call = pipeline.new_call(call_id="c1", name="get_notes", args={}, tool=tool)
    failure = classify(ToolRaised(error), call)
    assert failure.error.value == "invalid_arguments"
    names = [f["name"] for f in failure.extra["fields"]]
    assert names == ["topic"]
    assert set(failure.extra["fields"][0]) == {"name", "problem", "expected", "received", "message"}
    assert "state" not in failure.message + failure.suggestion


def test_problems_vocabulary() -> None:
    assert PROBLEMS == (
        "missing",
        "unexpected",
        "wrong_type",
        "out_of_range",
        "cross_field",
        "invalid",
    )
    assert CallRecord(tool="t", call_id="c").repairs == []


# -- through every adapter -----------------------------------------------------------

FEEDBACK = [
    # (id, tool, args, policy kwargs, [(name, problem)])
    ("missing", booking_tool, {"nights": 2}, {}, [("room", "missing")]),
    ("wrong-type", booking_tool, {"room": "single", "nights": "five"}, {},
     [("nights", "wrong_type")]),
    ("out-of-range", booking_tool, {"room": "single", "nights": 0}, {},
     [("nights", "out_of_range")]),
    ("enum", booking_tool, {"room": "suite", "nights": 1}, {}, [("room", "invalid")]),
    ("cross-field", booking_tool, {"room": "single", "nights": 1, "start_day": 3, "end_day": 2},
     {}, [("(arguments)", "cross_field")]),
    ("unexpected", booking_tool, {"room": "single", "nights": 1, "pets": 2},
     {}, [("pets", "unexpected")]),  # the default: unknown_args="reject"
    ("several", booking_tool, {"room": "suite", "nights": "five"}, {},
     [("room", "invalid"), ("nights", "wrong_type")]),
    ("dict-schema", dict_tool, {"query": "q", "limit": 99}, {}, [("limit", "out_of_range")]),
    ("injected-hidden", notes_tool, {"topic": "five"}, {}, [("topic", "wrong_type")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "args", "policy_kw", "expected"),
    [f[1:] for f in FEEDBACK],
    ids=[f[0] for f in FEEDBACK],
)
def test_feedback_scenarios(
    harness: Harness,
    make: Any,
    args: dict[str, Any],
    policy_kw: dict[str, Any],
    expected: list[tuple[str, str]],
) -> None:
    tool = make()
    result = harness.run(
        [tool], [tool_call(tool.name, args, id="c1")], policy=ToolPolicy(**policy_kw)
    )
    message = result["c1"]
    assert message.status == "error"
    data = json.loads(message.content)
    assert data["error"] == "invalid_arguments" and data["retryable"] is False
    assert [(f["name"], f["problem"]) for f in data["fields"]] == expected
    assert all(f["message"] for f in data["fields"])
    assert data["fields"][0]["message"] in data["message"]
    assert "Example: {" in data["suggestion"] and f"{tool.name}(" in data["suggestion"]
    assert CALLS[tool.name] == 0  # rejected before the tool ran
    assert "state" not in message.content
    if harness.adapter != "tool":
        assert [r["error"] for r in result.tool_errors] == ["invalid_arguments"]


def test_suggestion_shows_a_valid_call(harness: Harness) -> None:
    result = harness.run([booking_tool()], [tool_call("book_room", {"nights": 1}, id="c1")])
    suggestion = json.loads(result["c1"].content)["suggestion"]
    assert "book_room(room: 'single' | 'double', nights: integer" in suggestion
    assert '{"room": "single", "nights": 1}' in suggestion


@pytest.mark.parametrize("malformed", [False, True], ids=["args", "malformed"])
def test_dropped_arguments_are_named_when_the_call_still_fails(
    harness: Harness, malformed: bool
) -> None:
    """With ``unknown_args="drop"`` (not the default) a dropped argument is named too when
    the call fails for another reason."""
    if malformed and harness.adapter == "tool":
        pytest.skip("invalid calls never reach a tool; the node and middleware answer them")
    tool = booking_tool()
    sent = {"nights": 1, "breakfast_xyz": True}  # `room` missing, an unknown argument
    policy = ToolPolicy(args=Args(unknown="drop"))
    if malformed:
        raw = json.dumps(sent)[:-1] + ",}"  # a trailing comma: repaired, then validated
        bad = [invalid_call("book_room", raw, id="c1")]
        result = harness.run([tool], invalid_tool_calls=bad, policy=policy)
    else:
        result = harness.run([tool], [tool_call("book_room", sent, id="c1")], policy=policy)
    data = json.loads(result["c1"].content)
    assert data["error"] == "invalid_arguments"
    assert data["dropped"] == ["breakfast_xyz"]
    assert "'breakfast_xyz' were dropped" in data["message"]
    assert [f["name"] for f in data["fields"]] == ["room"]
    assert CALLS["book_room"] == 0
