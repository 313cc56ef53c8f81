"""The validation shortcut for plain schemas: arguments of exactly the declared types are
known valid without asking pydantic, and only then.

`schema.plain_fields` says when a model can refuse a value only for its type; a call
whose arguments all have a declared exact type (`validate.logic.fits_plain`) is then
valid. The property checked here: whenever the shortcut says "valid", pydantic agrees,
over random plain models and random arguments; and anything that could refuse a value
otherwise (a validator, a constraint, an alias, a setting) turns the shortcut off.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.tools import StructuredTool, tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from langchain_resilient_tools.pipeline.schema import plain_fields, tool_schema
from langchain_resilient_tools.pipeline.validate.logic import check, fits_plain
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness

ANNOTATIONS: list[Any] = [str, int, float, bool, str | None, int | None, float | None]
VALUES = st.one_of(
    st.text(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def models_and_args(draw: st.DrawFn) -> tuple[type[BaseModel], dict[str, Any]]:
    names = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4, unique=True))
    fields: dict[str, Any] = {}
    for name in names:
        annotation = draw(st.sampled_from(ANNOTATIONS))
        fields[name] = (annotation, ...) if draw(st.booleans()) else (annotation, None)
    model = create_model("Args", **fields)
    keys = draw(st.lists(st.sampled_from("abcdefg"), max_size=5, unique=True))
    return model, {k: draw(VALUES) for k in keys}


@settings(max_examples=400, deadline=None)
@given(models_and_args())
def test_the_shortcut_says_valid_only_when_pydantic_agrees(
    drawn: tuple[type[BaseModel], dict[str, Any]],
) -> None:
    model, args = drawn
    plain = plain_fields(model)
    assert plain is not None  # every drawn model is plain
    if fits_plain(*plain, args):
        model.model_validate(args)  # raises if the shortcut was wrong


def _model(**kw: Any) -> type[BaseModel]:
    return create_model("Args", **kw)


class WithValidator(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be positive")
        return v


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)
    n: int


class Short(BaseModel):
    model_config = ConfigDict(str_max_length=3)
    s: str


class Aliased(BaseModel):
    s: str = Field(alias="S")


class OwnValidate(BaseModel):
    n: int

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> OwnValidate:
        if isinstance(obj, dict) and obj.get("n") == 13:
            raise ValueError("unlucky")
        return super().model_validate(obj, *args, **kwargs)


class OwnCoreSchema(BaseModel):
    n: int

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return handler(source)


@pytest.mark.parametrize(
    "model",
    [
        OwnValidate,
        OwnCoreSchema,
        WithValidator,
        Strict,
        Short,
        Aliased,
        _model(n=(Annotated[int, Field(gt=0)], ...)),
        _model(kind=(Literal["a", "b"], ...)),
        _model(items=(list[int], ...)),
    ],
    ids=[
        "own_model_validate",
        "own_core_schema",
        "validator",
        "strict",
        "str_max_length",
        "alias",
        "constraint",
        "literal",
        "list",
    ],
)
def test_anything_else_that_could_refuse_turns_the_shortcut_off(model: type[BaseModel]) -> None:
    assert plain_fields(model) is None


def test_a_refused_value_of_the_right_type_is_still_refused() -> None:
    """The shortcut is off for a constrained schema: its problem is reported as before."""

    def get_item(n: Annotated[int, Field(gt=0)]) -> str:
        """Gets an item."""
        return f"item {n}"

    t = StructuredTool.from_function(get_item)
    ts = tool_schema(t)
    assert ts.plain is None
    problems = check(ts, {"n": -1}, reject_unknown=True)
    assert [p["name"] for p in problems] == ["n"]


def test_langchain_tools_of_plain_arguments_take_the_shortcut() -> None:
    """The usual `@tool` of str/int/float/bool arguments is plain (the shortcut is live)."""

    @tool
    def search_docs(query: str, limit: int = 5, score: float | None = None) -> str:
        """Searches."""
        return query

    ts = tool_schema(search_docs)
    assert ts.plain is not None and ts.required == {"query"}
    assert check(ts, {"query": "q", "limit": 2}, reject_unknown=True) == []
    # Not certain by type alone: pydantic decides (a numeric string is converted).
    assert check(ts, {"query": "q", "limit": "2"}, reject_unknown=True) == []
    problems = check(ts, {"query": "q", "limit": "many", "extra": 1}, reject_unknown=True)
    assert sorted(p["name"] for p in problems) == ["extra", "limit"]


def test_through_every_adapter_a_wrong_type_is_still_answered(harness: Harness) -> None:
    @tool
    def get_stock(item: str, count: int) -> str:
        """Stock of an item."""
        return f"{count} {item}"

    calls = [
        tool_call("get_stock", {"item": "tea", "count": 2}, id="ok"),
        tool_call("get_stock", {"item": "tea", "count": "lots"}, id="bad"),
    ]
    result = harness.run([get_stock], calls)
    assert result["ok"].content == "2 tea"
    data = json.loads(result["bad"].content)
    assert data["error"] == "invalid_arguments"
    assert [f["name"] for f in data["fields"]] == ["count"]


def test_the_check_is_the_models_when_pydantic_would_refuse() -> None:
    model = _model(n=(int, ...))
    plain = plain_fields(model)
    assert plain is not None
    assert not fits_plain(*plain, {})  # missing: pydantic's answer, not ours
    with pytest.raises(ValidationError):
        model.model_validate({})
