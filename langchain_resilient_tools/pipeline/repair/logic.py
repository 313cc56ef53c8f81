"""Argument repair: a pure function of a call's arguments and the tool's JSON schema.

`repair_call` returns a repaired copy and the list of repairs it made, or the reason the
arguments cannot be read. The rule (DESIGN invariant 14): a repaired call reaches the
tool with exactly the values the model wrote, under the names it meant, or it is
refused with a model-fixable ``invalid_arguments`` / ``malformed_call`` answer.

Repaired, because only one meaning is possible:

- malformed JSON text (`jsontext.parse_args`): a Markdown fence, single quotes, a
  trailing comma, Python's ``True``/``None``, unquoted keys; only when every string,
  number and constant of the text is a key or value of the result, each as often;
- parameter names (`names`): an alias the user configured (``aliases=``) first, then a
  spelling variant of exactly one parameter when no other is a plausible target: the
  same words in another case or with other separators (``userId``, ``user-id``,
  ``UserID`` for ``user_id``), one word in its other number (``tag`` for ``tags``), or
  one typo inside a word of at least five letters, not at its first letter
  (``adress``, ``quantiy``); a given argument is never overwritten;
- types, top-level arguments only: a JSON string where an object or array is expected,
  a single value where an array is expected (not a text with a list separator in it,
  ``"a, b"``, which may mean several items), numeric strings (surrounding space
  allowed) for integer/number, ``"true"``/``"false"`` in any case for boolean.

Refused, because the model may have meant something else:

- text that looks cut off (an unclosed string, object or array at its end, e.g. a
  missing ``}``), text after the object, or text no reader repairs with every value kept:
  ``malformed_call``;
- a name that is a different word, an abbreviation or a synonym (``begin_date`` for
  ``start_date``, ``loc`` for ``location``, ``min``/``max``, ``from``/``to``), or a
  variant of two parameters: left as it is, so that validation answers
  ``invalid_arguments`` naming it and listing the valid names (``unknown_args="reject"``,
  the default); ``unknown_args="drop"`` drops it and tells the model instead. A schema
  that allows extra keys (``additionalProperties``) keeps them either way;
- anything else that does not fit (a missing required argument is never invented):
  validation answers it.

It never raises on JSON-like input, is idempotent, and leaves valid arguments untouched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...text.redact import mask_value, redact
from ..schema import SchemaFacts, schema_facts
from ..schema import norm as _norm
from .jsontext import MAX_REPAIR_CHARS, parse_args, truncation
from .names import closest

__all__ = [
    "MAX_REPAIR_CHARS",
    "Repaired",
    "SchemaFacts",
    "UnknownArgs",
    "fits",
    "parse_args",
    "repair_call",
    "schema_facts",
    "truncation",
]

UnknownArgs = Literal["drop", "reject"]
"""What happens to arguments the schema does not know (and that no name repair maps):
rejected with ``invalid_arguments``, or dropped and reported."""

_INT = re.compile(r"[+-]?\d{1,30}")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_LIST_SEPARATOR = re.compile(r"[,;\n]\s*\S")


def _q(name: object) -> str:
    return "'" + redact(str(name), limit=40).replace("'", "") + "'"


@dataclass(frozen=True, slots=True)
class Repaired:
    """The result of `repair_call`: the arguments (or why there are none) and the repairs."""

    args: dict[str, Any] | None
    repairs: tuple[str, ...] = ()
    error: str | None = None
    """Why the argument text could not be read as a JSON object (`args` is then None)."""
    unknown: tuple[str, ...] = field(default=())
    """Arguments the schema does not know that were kept (``unknown_args="reject"``)."""
    dropped: tuple[str, ...] = field(default=())
    """Arguments the schema does not know that were dropped (names redacted)."""


# -- names and types ---------------------------------------------------------------


_ACCEPTED_BY: dict[type, frozenset[str]] = {
    bool: frozenset({"boolean"}),
    int: frozenset({"integer", "number"}),
    float: frozenset({"number"}),
    str: frozenset({"string"}),
    dict: frozenset({"object"}),
    list: frozenset({"array"}),
    type(None): frozenset({"null"}),
}
"""The JSON types a plain Python value already is (exact types only)."""


def fits(args: Mapping[str, Any], facts: SchemaFacts) -> bool:
    """Whether `args` need no repair: every name is known and every value is already of
    a type its argument accepts. The common case, answered without building anything."""
    props, kinds = facts.props, facts.kinds
    for name, value in args.items():
        if name not in props:
            return False
        accepted = kinds[name]
        if not accepted:
            continue
        is_a = _ACCEPTED_BY.get(type(value))
        if is_a is None:  # a subclass (an enum, ...): the full check decides
            if _coerce(value, accepted)[1]:
                return False
        elif is_a.isdisjoint(accepted) and not (
            type(value) is float and "integer" in accepted and value.is_integer()
        ):
            return False
    return True


def _coerce(value: Any, kinds: frozenset[str]) -> tuple[Any, str | None]:
    """Convert `value` to one of `kinds` when the meaning is certain: (value, what was done)."""
    if not kinds:
        return value, None
    if isinstance(value, bool):
        is_kind = "boolean" in kinds
    elif isinstance(value, int):
        is_kind = bool(kinds & {"integer", "number"})
    elif isinstance(value, float):
        is_kind = "number" in kinds or ("integer" in kinds and value.is_integer())
    elif isinstance(value, str):
        is_kind = "string" in kinds
    elif isinstance(value, dict):
        is_kind = "object" in kinds
    elif isinstance(value, list):
        is_kind = "array" in kinds
    else:
        is_kind = value is None and "null" in kinds
    if is_kind or (value is None and "null" in kinds):
        return value, None
    if isinstance(value, str):
        s = value.strip()
        if kinds & {"object", "array"} and s[:1] in ("{", "["):
            try:
                parsed = json.loads(s)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and "object" in kinds:
                return parsed, "an object"
            if isinstance(parsed, list) and "array" in kinds:
                return parsed, "an array"
        if "integer" in kinds and _INT.fullmatch(s):
            return int(s), "an integer"
        if "number" in kinds and _NUMBER.fullmatch(s):
            number = float(s)
            if number == number and abs(number) != float("inf"):
                return (int(s) if _INT.fullmatch(s) else number), "a number"
        if "boolean" in kinds and s.lower() in ("true", "false"):
            return s.lower() == "true", "a boolean"
    if "array" in kinds and value is not None and not isinstance(value, list):
        if isinstance(value, str) and _LIST_SEPARATOR.search(value):
            return value, None  # "a, b": one item, or several? Not guessed.
        return [value], "a list of one item"
    return value, None


def _match(
    key: str,
    facts: SchemaFacts,
    out: Mapping[str, Any],
    alias_of: Mapping[str, str],
    renamed_from: Mapping[str, str],
) -> str | None:
    """The schema argument an unknown name `key` stands for, or None: an alias the user
    configured, else the one parameter it is a spelling variant of (`names.closest`)."""
    canonical = alias_of.get(key)
    if canonical is None:
        canonical = facts.by_norm.get(_norm(key))
    if canonical is None:
        canonical = closest(key, facts.names)
    if canonical is None or canonical in out or canonical in renamed_from:
        return None  # never overwrite an argument the model gave
    return canonical


def repair_call(
    args: Mapping[str, Any] | str | None,
    schema: SchemaFacts | Mapping[str, Any],
    aliases: Mapping[str, Sequence[str]] | None = None,
    *,
    unknown_args: UnknownArgs = "reject",
) -> Repaired:
    """Repair a call's arguments (a dict, or raw argument text) against `schema`.

    Returns a copy (the input is not changed) with the repairs made, in order, as short
    sentences such as ``renamed 'userId' to 'user_id'``; or `Repaired.error` when the text
    cannot be read as a JSON object.
    """
    facts = schema if isinstance(schema, SchemaFacts) else schema_facts(schema)
    repairs: list[str] = []
    if args is None or isinstance(args, str):
        parsed, note, error = parse_args(args or "")
        if parsed is None:
            return Repaired(None, error=error or "the arguments could not be read")
        if note:
            repairs.append(note)
        args = parsed
    elif not isinstance(args, Mapping):
        return Repaired(None, error="the arguments are not a JSON object")
    if not facts.known:
        return Repaired(dict(args), tuple(repairs))
    props = facts.props
    if fits(args, facts):
        return Repaired(dict(args), tuple(repairs))  # the common case: nothing to do
    out: dict[str, Any] = {k: v for k, v in args.items() if k in props}
    alias_of: dict[str, str] = {}
    for canonical, names in (aliases or {}).items():
        if canonical in props:
            for alias in names:
                alias_of[alias] = canonical
    renamed: dict[str, str] = {}
    unknown: list[str] = []
    for key, value in args.items():
        if key in props:
            continue
        target = _match(str(key), facts, out, alias_of, renamed)
        if target is None:
            unknown.append(key)
            continue
        renamed[target] = key
        out[target] = value
        repairs.append(f"renamed {_q(key)} to {_q(target)}")
    for key in list(out):
        value, kind = _coerce(out[key], facts.kinds[key])
        if kind is not None:
            out[key] = value
            repairs.append(
                f"parsed {_q(key)} value {mask_value(_sent(args, key, renamed), limit=40)} as {kind}"
            )
    kept: list[str] = []
    dropped: list[str] = []
    for key in unknown:
        if facts.open or unknown_args == "reject":
            out[key] = args[key]
            kept.append(key)
        else:
            repairs.append(f"dropped unknown argument {_q(key)}")
            dropped.append(_q(key).strip("'"))
    return Repaired(
        out,
        tuple(repairs),
        unknown=tuple(kept) if not facts.open else (),
        dropped=tuple(dropped),
    )


def _sent(args: Mapping[str, Any], key: str, renamed: Mapping[str, str]) -> Any:
    """The value the model sent for `key` (under its original name, if it was renamed)."""
    return args[renamed.get(key, key)]
