"""Repair never changes what the model meant (DESIGN invariant 14, issue 32).

The three ways it used to: a name mapped to the wrong sibling, an unknown argument
dropped from a call that ran, a JSON repair that cut a value short; each through every
adapter (node, wrapper, middleware; sync and async). Then the rules of the pure function
as tables, and two properties over generated schemas: a valid call is never touched, and
a realistic mistake is either repaired to exactly the intended call or refused.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, ValidationError

from langchain_resilient_tools import Args, ResilientToolNode, ToolPolicy
from langchain_resilient_tools.pipeline.repair.jsontext import parse_args, survives
from langchain_resilient_tools.pipeline.repair.logic import repair_call
from langchain_resilient_tools.pipeline.repair.names import closest, words
from langchain_resilient_tools.testing import invalid_call, tool_call
from tests.conftest import Harness
from tests.support.answers import error_of
from tests.tools import CALLS, counted

received: list[dict[str, Any]] = []
"""The arguments each tool body received, in order."""


def seen_tool(name: str, fn: Any) -> BaseTool:
    """A counted tool that records the arguments its body receives (only those sent)."""

    @functools.wraps(fn)
    def body(**kwargs: Any) -> Any:
        received.append(dict(kwargs))
        return fn(**kwargs)

    return counted(name, body)


@pytest.fixture(autouse=True)
def clear_seen() -> None:
    received.clear()


def rooms_tool() -> BaseTool:
    def list_rooms(
        start_available_date: str | None = None, end_available_date: str | None = None
    ) -> str:
        return f"rooms from {start_available_date} to {end_available_date}"

    return seen_tool("list_rooms", list_rooms)


ROOMS_UNSET = {"start_available_date": None, "end_available_date": None}


def art_tool() -> BaseTool:
    def search_art(artist: str, material: str, location: str | None = None) -> str:
        return f"{artist}/{material} in {location or 'any location'}"

    return seen_tool("search_art", search_art)


def prefs_tool() -> BaseTool:
    def save_prefs(prefs: str, source: str = "user") -> str:
        return f"{source}: {prefs}"

    return seen_tool("save_prefs", save_prefs)


def prefs_object_tool() -> BaseTool:
    def save_prefs(prefs: dict[str, str], source: str = "user") -> str:
        return f"{source}: {sorted(prefs.items())}"

    return seen_tool("save_prefs", save_prefs)


# -- 1. a name is never mapped to a sibling ------------------------------------------


@pytest.mark.parametrize(
    "sent",
    ["begin_available_date", "beginAvailableDate", "from_available_date", "available_date"],
)
def test_a_different_word_is_not_read_as_the_siblings_name(harness: Harness, sent: str) -> None:
    """``begin_available_date`` is neither ``start_available_date`` nor (as it used to be
    read) ``end_available_date``: the call is refused, naming it and the valid names."""
    call = tool_call("list_rooms", {sent: "2024-05-01"}, id="c1")
    result = harness.run([rooms_tool()], [call])
    data = error_of(result)
    assert data["error"] == "invalid_arguments"
    assert [(f["name"], f["problem"]) for f in data["fields"]] == [(sent, "unexpected")]
    for name in (sent, "start_available_date", "end_available_date"):
        assert f"'{name}'" in data["message"]
    assert "renamed" not in result["c1"].content
    assert received == [] and CALLS["list_rooms"] == 0


@pytest.mark.parametrize(
    ("sent", "meant"),
    [
        ("startAvailableDate", "start_available_date"),
        ("start_available_dates", "start_available_date"),
        ("strat_available_date", "start_available_date"),
        ("end_availabel_date", "end_available_date"),
    ],
)
def test_a_spelling_variant_of_one_name_is_repaired(
    harness: Harness, sent: str, meant: str
) -> None:
    result = harness.run([rooms_tool()], [tool_call("list_rooms", {sent: "2024-05-01"}, id="c1")])
    assert result["c1"].status == "success"
    assert received == [{**ROOMS_UNSET, meant: "2024-05-01"}]
    assert f"renamed '{sent}' to '{meant}'" in result["c1"].content


# -- 2. an unknown argument is never dropped from a call that runs -----------------------


def test_an_unknown_argument_is_refused_not_dropped(harness: Harness) -> None:
    call = tool_call(
        "search_art", {"artist": "Bernini", "material": "marble", "loc": "Rome"}, id="c1"
    )
    result = harness.run([art_tool()], [call])
    data = error_of(result)
    assert data["error"] == "invalid_arguments" and data["retryable"] is False
    assert [(f["name"], f["problem"]) for f in data["fields"]] == [("loc", "unexpected")]
    assert "'loc' is not a parameter" in data["message"]
    assert "'artist', 'material', 'location'" in data["message"]
    assert "search_art(artist: string, material: string, location?:" in data["suggestion"]
    assert received == [] and CALLS["search_art"] == 0
    if harness.adapter != "tool":
        assert [r["error"] for r in result.tool_errors] == ["invalid_arguments"]


def test_drop_keeps_the_old_behaviour_when_asked(harness: Harness) -> None:
    call = tool_call(
        "search_art", {"artist": "Bernini", "material": "marble", "loc": "Rome"}, id="c1"
    )
    result = harness.run([art_tool()], [call], policy=ToolPolicy(args=Args(unknown="drop")))
    assert result["c1"].status == "success"
    assert received == [{"artist": "Bernini", "material": "marble", "location": None}]
    assert "dropped unknown argument 'loc'" in result["c1"].content


@pytest.mark.parametrize("handle", [False, "custom"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_unknown_argument_is_refused_where_the_tool_validates_itself(
    handle: Any, mode: str
) -> None:
    """A node whose ``handle_tool_errors`` the author set leaves validation to the tool,
    whose pydantic schema would ignore the unknown argument: it is refused first."""
    node = ResilientToolNode(
        [art_tool()], handle_tool_errors=(lambda e: "handled") if handle == "custom" else handle
    )
    args = {"artist": "Bernini", "material": "marble", "loc": "Rome"}
    state = {"messages": [AIMessage("", tool_calls=[tool_call("search_art", args, id="c1")])]}
    config: Any = {"configurable": {"__pregel_runtime": Runtime()}}
    out = node.invoke(state, config) if mode == "sync" else await node.ainvoke(state, config)
    message = out["messages"][0]
    assert message.status == "error"
    assert json.loads(message.content)["fields"][0]["name"] == "loc"
    assert received == []


class OpenArgs(BaseModel):
    model_config = ConfigDict(extra="allow")
    query: str


OPEN_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": True,
}


@pytest.mark.parametrize("schema", [OPEN_SCHEMA, OpenArgs], ids=["json-schema", "pydantic"])
def test_a_schema_that_allows_extra_keys_keeps_them(harness: Harness, schema: Any) -> None:
    def run(**kw: Any) -> str:
        received.append(kw)
        return "ok"

    tool = StructuredTool(name="search", description="Search.", args_schema=schema, func=run)
    result = harness.run([tool], [tool_call("search", {"query": "q", "loc": "Rome"}, id="c1")])
    assert result["c1"].content == "ok"
    assert received == [{"query": "q", "loc": "Rome"}]


def test_kwargs_of_a_function_do_not_take_unknown_arguments(harness: Harness) -> None:
    """LangChain gives ``**kwargs`` a parameter of its own, ``kwargs``, and drops other
    names itself: an unknown name is refused (with ``kwargs`` among the valid names)."""

    @tool
    def search(query: str, **kwargs: Any) -> str:
        """Search."""
        received.append({"query": query, **kwargs})
        return "ok"

    result = harness.run([search], [tool_call("search", {"query": "q", "loc": "Rome"}, id="c1")])
    data = error_of(result)
    assert "'query', 'kwargs'" in data["message"] and received == []


def test_an_unknown_field_of_a_nested_object_lists_that_objects_fields() -> None:
    from langchain_resilient_tools.text.fields import from_jsonschema, from_pydantic

    class Address(BaseModel):
        model_config = ConfigDict(extra="forbid")
        street: str

    class Order(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str
        address: Address

    sent = {"name": "x", "loc": 1, "address": {"street": "s", "zip": 1}}
    with pytest.raises(ValidationError) as info:
        Order.model_validate(sent)
    schema = Order.model_json_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    for fields in (
        from_pydantic(info.value.errors(), schema),
        from_jsonschema(validator.iter_errors(sent)),
    ):
        messages = {f["name"]: f["message"] for f in fields if f["problem"] == "unexpected"}
        assert "Its parameters are 'name', 'address'" in messages["loc"]
        assert (
            "'address.zip' is not a field of that object. Its fields are 'street'"
            in (messages["address.zip"])
        )


# -- 3. a JSON repair never cuts a value short -------------------------------------------

NESTED = """{'prefs': '{"style": "modern", "budget": "mid"}', 'source': 'db'}"""


@pytest.mark.parametrize(
    ("make", "prefs"),
    [
        (prefs_tool, '{"style": "modern", "budget": "mid"}'),
        (prefs_object_tool, {"style": "modern", "budget": "mid"}),
    ],
    ids=["string", "object"],
)
def test_single_quoted_text_with_json_inside_keeps_every_value(
    harness: Harness, make: Any, prefs: Any
) -> None:
    if harness.adapter == "tool":
        pytest.skip("invalid calls never reach a tool; the node and middleware answer them")
    result = harness.run([make()], invalid_tool_calls=[invalid_call("save_prefs", NESTED, id="c1")])
    assert result["c1"].status == "success", result["c1"].content
    assert received == [{"prefs": prefs, "source": "db"}]


@pytest.mark.parametrize(
    "raw",
    [
        '{"prefs": "modern", "source": "db"',  # a missing '}': possibly cut off
        '{"prefs": "mod',
        '{"prefs": , "source": "db"}',  # a value missing: never invented
        '{"prefs": "a", "prefs": "b",}',  # which one?
        '{"prefs": "a" "b", "source": "db"}',  # one value or two?
    ],
)
def test_text_that_no_repair_keeps_whole_is_refused(harness: Harness, raw: str) -> None:
    if harness.adapter == "tool":
        pytest.skip("invalid calls never reach a tool; the node and middleware answer them")
    result = harness.run(
        [prefs_tool()], invalid_tool_calls=[invalid_call("save_prefs", raw, id="c1")]
    )
    data = error_of(result)
    assert data["error"] == "malformed_call"
    assert "save_prefs(prefs: string, source?: string)" in data["suggestion"]
    assert received == []


def test_a_missing_required_argument_is_never_invented(harness: Harness) -> None:
    call = tool_call("search_art", {"artist": "Bernini"}, id="c1")
    data = error_of(harness.run([art_tool()], [call]))
    assert [(f["name"], f["problem"]) for f in data["fields"]] == [("material", "missing")]
    assert received == []


# -- the rules, as tables ---------------------------------------------------------------

SIBLINGS = ["start_date", "end_date", "min_price", "max_price", "source_lang", "target_lang",
            "location", "quantity", "address", "tags", "user_id", "from_city", "to_city"]  # fmt: skip

NAMES = [
    # (sent, meant or None: refused)
    ("startDate", "start_date"), ("Start-Date", "start_date"), ("START_DATE", "start_date"),
    ("start_dates", "start_date"), ("tag", "tags"), ("min_prices", "min_price"),
    ("strat_date", "start_date"), ("stat_date", "start_date"), ("locaton", "location"),
    ("quantiy", "quantity"), ("adress", "address"), ("sourc_lang", "source_lang"),
    ("userID", "user_id"), ("locations", "location"),
    ("begin_date", None), ("finish_date", None), ("date", None), ("loc", None), ("qty", None),
    ("minimum_price", None), ("mn_price", None), ("price", None), ("src_lang", None),
    ("origin_city", None), ("fromCity2", None), ("start_dte", None), ("dtart_date", None),
    ("sart_date", "start_date"), ("usre_id", None), ("quantity_a", None),
]  # fmt: skip


@pytest.mark.parametrize(("sent", "meant"), NAMES)
def test_which_names_are_read_as_a_parameter(sent: str, meant: str | None) -> None:
    assert closest(sent, SIBLINGS) == meant


@pytest.mark.parametrize(
    ("params", "sent"),
    [
        (["state", "stage"], "stae"),
        (["quantity_a", "quantity_b"], "quantity"),
        (["item", "items"], "itemz"),
        (["user_name", "user_game"], "user_nme"),
        (["count", "court"], "coutn"),
    ],
)
def test_two_plausible_targets_are_never_chosen_between(params: list[str], sent: str) -> None:
    assert closest(sent, params) is None


def test_words() -> None:
    assert words("userID") == ("user", "id")
    assert words("HTTPServer_url") == ("http", "server", "url")
    assert words("addressLine2") == ("address", "line", "2")
    assert words("größe-max") == ("größe", "max")
    assert words("$") == () and closest("-", ["$", "a"]) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (NESTED, {"prefs": '{"style": "modern", "budget": "mid"}', "source": "db"}),
        ("{'a': True, 'b': None, 'c': [1, 2,],}", {"a": True, "b": None, "c": [1, 2]}),
        ('{"a": "b\\/c",}', {"a": "b/c"}),
        ("{'a': 'it\\'s'}", {"a": "it's"}),
        ('{a: 1, "b": -2.5e3}', {"a": 1, "b": -2500.0}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('{"a": 1};', {"a": 1}),
    ],
)
def test_json_text_repairs(raw: str, expected: dict[str, Any]) -> None:
    args, note, error = parse_args(raw)
    assert (args, error) == (expected, None) and note


def test_the_check_counts_every_value() -> None:
    assert survives("{'a': 'x', 'b': 1}", {"a": "x", "b": 1})
    assert not survives("{'a': 'x', 'b': 1}", {"a": "x"})  # a value lost
    assert not survives("{'a': 'x y'}", {"a": "x"})  # cut short
    assert not survives("{'a': }", {"a": ""})  # invented
    assert not survives("{'a': 'x'}", {"a": "x", "b": None})
    assert not survives("{'a': 'x", {"a": "x"})  # an unclosed string


# -- properties -------------------------------------------------------------------------

WORDS = ["user", "start", "end", "date", "price", "min", "max", "source", "target", "name",
         "location", "quantity", "city", "from", "to", "count", "limit", "query", "country",
         "address", "number", "item", "type", "value", "title", "time", "zone", "currency"]  # fmt: skip
TYPES: dict[str, Any] = {
    "string": st.text(max_size=12),
    "integer": st.integers(-(10**6), 10**6),
    "number": st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-1000, 1000),
    "boolean": st.booleans(),
    "array": st.lists(st.text(max_size=6), max_size=3),
    "object": st.dictionaries(st.text(max_size=6), st.integers(), max_size=3),
}
SCHEMA_OF = {
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "array": {"type": "array", "items": {"type": "string"}},
    "object": {"type": "object"},
}


def _name(parts: list[str], style: str) -> str:
    if style == "camel":
        return parts[0] + "".join(p.title() for p in parts[1:])
    return "_".join(parts)


NAME = st.builds(
    _name,
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.sampled_from(["snake", "camel"]),
)


@st.composite
def schemas_and_calls(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    names = draw(st.lists(NAME, min_size=1, max_size=6, unique_by=lambda n: "".join(words(n))))
    kinds = {n: draw(st.sampled_from(sorted(TYPES))) for n in names}
    required = [n for n in names if draw(st.booleans())]
    schema = {
        "type": "object",
        "properties": {n: SCHEMA_OF[k] for n, k in kinds.items()},
        "required": required,
    }
    call = {n: draw(TYPES[kinds[n]]) for n in names if n in required or draw(st.booleans())}
    return schema, call


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same JSON types all the way down (1 is not 1.0, True is not 1)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=100, deadline=None)
@given(case=schemas_and_calls())
def test_a_valid_call_is_never_touched(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, call = case
    for form in (call, json.dumps(call)):
        r = repair_call(form, schema)
        assert r.error is None and r.repairs == () and r.unknown == ()
        assert same(r.args, call)


def _typo(word: str, at: int, kind: int) -> str:
    i = 1 + at % (len(word) - 2)  # never the first letter
    if kind == 0:
        return word[:i] + word[i + 1 :]  # a letter missing
    if kind == 1:
        return word[:i] + word[i] + word[i:]  # a letter doubled
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]  # two neighbours swapped


MUTATIONS = ["camel", "upper", "kebab", "plural", "typo", "synonym", "abbreviation", "extra",
             "as_string", "scalar_for_list", "json_string", "single_quotes", "trailing_comma",
             "cut_off"]  # fmt: skip
SYNONYMS = {"start": "begin", "end": "finish", "min": "lowest", "max": "highest",
            "source": "origin", "target": "destination", "from": "origin", "to": "dest",
            "location": "place", "city": "town", "quantity": "amount", "count": "total",
            "date": "day", "name": "label", "query": "search", "limit": "cap"}  # fmt: skip


def mutate(
    schema: dict[str, Any], call: dict[str, Any], kind: str, pick: int, at: int
) -> tuple[Any, dict[str, Any]] | None:
    """(what the model sent, what it meant) for one mistake, or None where it does not apply."""
    if kind in ("single_quotes", "trailing_comma", "cut_off"):
        text = json.dumps(call)
        if not call:
            return None
        if kind == "trailing_comma":
            return text[:-1] + ",}", call
        if kind == "cut_off":
            return text[: max(1, len(text) - 1 - at % 3)], call
        if any(
            "'" in json.dumps(k) + json.dumps(v) or "\\" in json.dumps(v) for k, v in call.items()
        ):
            return None  # single quotes inside values: another text altogether
        return text.replace('"', "'"), call
    if not call:
        return None
    name = sorted(call)[pick % len(call)]
    value = call[name]
    kind_of = schema["properties"][name]["type"]
    parts = list(words(name))
    if kind == "extra":
        return {**call, "verbose": True}, call
    if kind == "as_string":
        if kind_of not in ("integer", "number", "boolean"):
            return None
        return {**call, name: json.dumps(value)}, call
    if kind == "scalar_for_list":
        if kind_of != "array" or len(value) != 1 or any(c in value[0] for c in ",;\n"):
            return None
        return {**call, name: value[0]}, call
    if kind == "json_string":
        if kind_of not in ("array", "object"):
            return None
        return {**call, name: json.dumps(value)}, call
    if kind == "camel":
        sent = parts[0] + "".join(p.title() for p in parts[1:])
    elif kind == "upper":
        sent = name.upper()
    elif kind == "kebab":
        sent = "-".join(parts)
    elif kind == "plural":
        sent = "_".join([*parts[:-1], parts[-1] + "s"])
    elif kind == "typo":
        long = [i for i, p in enumerate(parts) if len(p) >= 5]
        if not long:
            return None
        i = long[pick % len(long)]
        parts[i] = _typo(parts[i], at, pick % 3)
        sent = "_".join(parts)
    elif kind == "synonym":
        swappable = [i for i, p in enumerate(parts) if p in SYNONYMS]
        if not swappable:
            return None
        i = swappable[pick % len(swappable)]
        parts[i] = SYNONYMS[parts[i]]
        sent = "_".join(parts)
    else:  # abbreviation
        long = [i for i, p in enumerate(parts) if len(p) >= 6]
        if not long:
            return None
        parts[long[0]] = parts[long[0]][:3]
        sent = "_".join(parts)
    if sent in schema["properties"]:
        return None  # the model wrote another parameter's name: nothing to repair
    sent_call = {k: v for k, v in call.items() if k != name}
    sent_call[sent] = value
    return sent_call, call


def runs_with(schema: dict[str, Any], sent: Any) -> dict[str, Any] | None:
    """The arguments the tool would receive (after repair and validation), or None:
    refused."""
    r = repair_call(sent, schema)
    if r.args is None or r.unknown:
        return None
    try:
        jsonschema.validate(r.args, schema)
    except jsonschema.ValidationError:
        return None
    return r.args


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    case=schemas_and_calls(),
    kind=st.sampled_from(MUTATIONS),
    pick=st.integers(0, 50),
    at=st.integers(0, 50),
)
def test_a_mistake_is_repaired_exactly_or_refused(
    case: tuple[dict[str, Any], dict[str, Any]], kind: str, pick: int, at: int
) -> None:
    schema, call = case
    mutated = mutate(schema, call, kind, pick, at)
    assume(mutated is not None)
    assert mutated is not None
    sent, meant = mutated
    ran = runs_with(schema, sent)
    assert ran is None or same(ran, meant), (sent, ran, meant)
