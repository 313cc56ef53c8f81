"""Per-argument feedback a model can act on: the envelope's ``fields``.

Every problem found in a call's arguments (by client-side validation, or by the tool's
own pydantic validation) becomes one entry::

    {"name": "quantity", "problem": "wrong_type", "expected": "an integer",
     "received": "'five'", "message": "Argument 'quantity' expected an integer, but ..."}

``problem`` is one of `PROBLEMS`. Received values pass through `text.redact.mask_value`;
injected arguments (state, store, runtime, ...) never appear.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import jsonschema

from . import messages as m
from .redact import mask_value, redact

Problem = Literal["missing", "unexpected", "wrong_type", "out_of_range", "cross_field", "invalid"]
PROBLEMS: tuple[Problem, ...] = (
    "missing", "unexpected", "wrong_type", "out_of_range", "cross_field", "invalid",
)  # fmt: skip
"""The kinds of argument problem reported in ``fields``."""

_NOTHING = object()
_RANGE_TYPES = frozenset(
    {
        "greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of",
        "too_short", "too_long", "string_too_short", "string_too_long", "finite_number",
    }
)  # fmt: skip
_TYPE_ERRORS = frozenset(
    {"is_instance_of", "model_type", "model_attributes_type", "dataclass_type", "none_required"}
)
_RANGE_KEYWORDS = frozenset(
    {
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
    }
)  # fmt: skip
_CROSS_KEYWORDS = frozenset(
    {
        "dependentRequired",
        "dependencies",
        "dependentSchemas",
        "oneOf",
        "anyOf",
        "allOf",
        "not",
        "if",
    }
)
_UNION_TAGS = frozenset(
    {"int", "str", "float", "bool", "bytes", "list", "dict", "set", "tuple", "none", "decimal"}
)


def field_problem(
    name: str,
    problem: Problem,
    expected: str,
    received: Any = _NOTHING,
    *,
    detail: str = "",
    valid: Iterable[str] = (),
) -> dict[str, Any]:
    """One entry of ``fields``, with its sentence for the model (`valid`: the names an
    unexpected argument may have meant, listed in its sentence)."""
    shown = None if received is _NOTHING else mask_value(received)
    if problem == "missing":
        message = m.FIELD_MISSING.format(name=name, expected=expected)
    elif problem == "unexpected":
        names = valid_names(valid)
        nested = "." in name or "[" in name
        template = m.FIELD_UNEXPECTED_NESTED if nested else m.FIELD_UNEXPECTED_NAMES
        message = (
            template.format(name=name, valid=names)
            if names
            else m.FIELD_UNEXPECTED.format(name=name)
        )
    elif problem == "wrong_type":
        message = m.FIELD_WRONG_TYPE.format(name=name, expected=expected, received=shown)
    elif problem == "out_of_range":
        message = m.FIELD_OUT_OF_RANGE.format(name=name, expected=expected, received=shown)
    elif problem == "cross_field":
        message = m.FIELD_CROSS.format(detail=detail) if detail else m.FIELD_CROSS_EMPTY
    else:
        message = m.FIELD_INVALID.format(
            name=name, detail=detail or f"expected {expected}", received=shown
        )
    return {
        "name": name,
        "problem": problem,
        "expected": expected,
        "received": shown,
        "message": message,
    }


_MAX_NAMES = 30


def valid_names(names: Iterable[str]) -> str:
    """``'a', 'b', 'c'`` (redacted; at most `_MAX_NAMES`, then how many more)."""
    listed = [f"'{redact(str(n), limit=60)}'" for n in names]
    if len(listed) > _MAX_NAMES:
        listed = [*listed[:_MAX_NAMES], f"and {len(listed) - _MAX_NAMES} more"]
    return ", ".join(listed)


def _clean(loc: Iterable[Any]) -> list[Any]:
    """`loc` without pydantic's union-member tags (``int``, ``function-after[...]``)."""
    return [
        part
        for i, part in enumerate(loc)
        if not (i and isinstance(part, str) and (part in _UNION_TAGS or "[" in part or "-" in part))
    ]


def arg_path(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + redact(str(part), limit=60)
    return out


def _props(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, Mapping) else {}


def _props_at(schema: Mapping[str, Any], loc: Sequence[Any]) -> list[str]:
    """The property names of the object at `loc` (the arguments themselves at ``()``)."""
    defs = schema.get("$defs", {}) if isinstance(schema.get("$defs"), Mapping) else {}
    sub: Any = schema
    for part in loc:
        if isinstance(sub, Mapping) and isinstance(sub.get("$ref"), str):
            sub = defs.get(sub["$ref"].rsplit("/", 1)[-1], {})
        if isinstance(part, int):
            sub = sub.get("items", {}) if isinstance(sub, Mapping) else {}
        else:
            sub = _props(sub).get(part, {}) if isinstance(sub, Mapping) else {}
    if isinstance(sub, Mapping) and isinstance(sub.get("$ref"), str):
        sub = defs.get(sub["$ref"].rsplit("/", 1)[-1], {})
    return list(_props(sub)) if isinstance(sub, Mapping) else []


def _expected(schema: Mapping[str, Any], loc: Sequence[Any], fallback: str) -> str:
    sub = _props(schema).get(loc[0]) if len(loc) == 1 else None
    if isinstance(sub, dict):
        return m.expected_text(sub)
    text = redact(fallback, limit=120)
    return text.removeprefix("Input should be ").removeprefix("input should be ") or "a valid value"


def _pydantic_problem(kind: str, loc: Sequence[Any]) -> Problem:
    if kind == "missing":
        return "missing"
    if kind == "extra_forbidden":
        return "unexpected"
    if kind in _RANGE_TYPES:
        return "out_of_range"
    if kind.endswith(("_type", "_parsing")) or kind in _TYPE_ERRORS:
        return "wrong_type"
    if not loc:
        return "cross_field"
    return "invalid"


def from_pydantic(
    errors: Iterable[Mapping[str, Any]],
    schema: Mapping[str, Any],
    hidden: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """``fields`` entries for pydantic's `ValidationError.errors()` (injected names left out)."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for err in errors:
        loc = _clean(err.get("loc", ()))
        if loc and loc[0] in hidden:
            continue
        kind = str(err.get("type", ""))
        problem = _pydantic_problem(kind, loc)
        name = arg_path(loc) or "(arguments)"
        if (name, problem) in seen:
            continue
        seen.add((name, problem))
        msg = str(err.get("msg", ""))
        if problem == "cross_field":
            detail = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            detail = redact(detail, limit=200).rstrip(".")
            out.append(field_problem(name, problem, "arguments that fit together", detail=detail))
            continue
        expected = "no such argument" if problem == "unexpected" else _expected(schema, loc, msg)
        received = _NOTHING if problem == "missing" else err.get("input", _NOTHING)
        plain = problem != "invalid" or kind in ("literal_error", "enum")
        detail = "" if plain else redact(msg, limit=160)
        valid = _props_at(schema, loc[:-1]) if problem == "unexpected" else ()
        out.append(field_problem(name, problem, expected, received, detail=detail, valid=valid))
    return out


def from_jsonschema(errors: Iterable[jsonschema.ValidationError]) -> list[dict[str, Any]]:
    """``fields`` entries for `jsonschema` validation errors."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()

    def add(entry: dict[str, Any]) -> None:
        if (entry["name"], entry["problem"]) not in seen:
            seen.add((entry["name"], entry["problem"]))
            out.append(entry)

    for err in errors:
        kw = str(err.validator)
        path = list(err.absolute_path)
        sub = err.schema if isinstance(err.schema, dict) else {}
        instance = err.instance
        if kw == "required" and isinstance(instance, dict):
            for key in err.validator_value or ():  # type: ignore[union-attr]
                if key not in instance:
                    field = _props(sub).get(key, {})
                    add(field_problem(arg_path([*path, key]), "missing", m.expected_text(field)))
        elif kw == "additionalProperties" and isinstance(instance, dict):
            for key in instance:
                if key not in _props(sub):
                    add(
                        field_problem(
                            arg_path([*path, key]),
                            "unexpected",
                            "no such argument",
                            valid=_props(sub),
                        )
                    )
        elif not path and kw in _CROSS_KEYWORDS:
            add(
                field_problem(
                    "(arguments)", "cross_field", "", detail=redact(err.message, limit=200)
                )
            )
        else:
            name = arg_path(path) or "(arguments)"
            expected = m.expected_text(sub)
            if kw in ("type", "anyOf", "oneOf"):
                add(field_problem(name, "wrong_type", expected, instance))
            elif kw in _RANGE_KEYWORDS:
                add(field_problem(name, "out_of_range", expected, instance))
            else:
                detail = redact(err.message, limit=160) if kw not in ("enum", "const") else ""
                add(field_problem(name, "invalid", expected, instance, detail=detail))
    return out
