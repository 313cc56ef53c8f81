"""Client-side validation of a call's arguments, with feedback a model can act on.

Arguments are checked against the schema the model sees: the tool's pydantic model
(its own ``args_schema`` when nothing is injected, so cross-field validators run too),
or, for tools whose schema is a plain JSON Schema dict (MCP tools, `StructuredTool`
from a dict), with the `jsonschema` package. Every problem becomes one entry of the
envelope's ``fields`` (see `text.fields`, where the feedback is worded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ...text.fields import arg_path, field_problem, from_jsonschema, from_pydantic
from ..schema import ToolSchema


def check(ts: ToolSchema, args: Mapping[str, Any], *, reject_unknown: bool) -> list[dict[str, Any]]:
    """Every problem of `args` against the tool's schema (empty list: valid)."""
    problems: list[dict[str, Any]] = []
    if ts.plain is not None and fits_plain(ts.plain, ts.required, args):
        return problems  # what the model would accept as it is (no unknown argument)
    if ts.model is not None:
        try:
            ts.model.model_validate(dict(args))
        except ValidationError as exc:
            problems = from_pydantic(exc.errors(), ts.schema, ts.hidden)
        except Exception:  # a validator that fails oddly: leave it to the tool itself
            problems = []
    elif ts.validator is not None:
        try:
            problems = from_jsonschema(ts.validator.iter_errors(dict(args)))
        except Exception:
            problems = []
    if reject_unknown:
        named = {p["name"] for p in problems if p["problem"] == "unexpected"}
        problems.extend(p for p in unexpected(ts, args) if p["name"] not in named)
    return problems


def fits_plain(
    plain: Mapping[str, frozenset[type]], required: frozenset[str], args: Mapping[str, Any]
) -> bool:
    """Whether `args` certainly fit a plain model (`schema.plain_fields`): every argument
    declared and of a type it takes as it is, none required missing. `False` says only
    "ask the model": it may still accept the value by converting it."""
    for key, value in args.items():
        accepted = plain.get(key)
        if accepted is None or type(value) not in accepted:
            return False
    return len(args) == len(plain) or required.issubset(args)


def unexpected(ts: ToolSchema, args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A problem for every argument the tool's (closed) schema does not know, each
    listing the valid names."""
    facts = ts.facts
    if not facts.known or facts.open:
        return []
    return [
        field_problem(arg_path([key]), "unexpected", "no such argument", valid=facts.names)
        for key in args
        if key not in facts.props and key not in ts.hidden
    ]
