"""Argument repair: a pure function of a call's arguments and the tool's JSON schema.

`repair_call` returns a repaired copy and the list of repairs it made, or the reason the
arguments cannot be read. It only changes what has one certain meaning:

- malformed JSON text: strict `json.loads`, then the json-repair library (inputs up to
  `MAX_REPAIR_CHARS`), never when the text looks cut off (a repair that has to invent
  the end of a value would silently shorten it);
- parameter names: policy aliases, then case/separator variants (``userId``,
  ``user-id``, ``UserID`` for ``user_id``), then one close spelling when exactly one
  schema field is close and that field is missing; a given argument is never overwritten;
- types, top-level arguments only: a JSON string where an object or array is expected,
  a single value where an array is expected, numeric strings (surrounding space allowed)
  for integer/number, ``"true"``/``"false"`` in any case for boolean;
- unknown arguments: dropped and reported (``unknown_args="drop"``) or left for
  validation to reject (``"reject"``); a schema that allows extra keys keeps them.

It never raises on JSON-like input, is idempotent, and leaves valid arguments untouched.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import json_repair

from ...text.redact import mask_value, redact
from ..schema import SchemaFacts, schema_facts
from ..schema import norm as _norm

UnknownArgs = Literal["drop", "reject"]
"""What happens to arguments the schema does not know: dropped and reported, or rejected."""

MAX_REPAIR_CHARS = 20_000
"""Longer argument text is not handed to the JSON repairer (it stays malformed)."""

SPELLING_CUTOFF = 0.8
"""Similarity (difflib ratio of normalised names) above which a name counts as close."""

_INT = re.compile(r"[+-]?\d{1,30}")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.S)


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


# -- malformed JSON ----------------------------------------------------------------


def _scan(text: str) -> tuple[str | None, int]:
    """Why `text` looks cut off (or None), and where its first top-level value ends."""
    stack: list[str] = []
    quote = ""
    prev = ""  # last significant character outside strings
    end = -1
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c == '"' or (c == "'" and prev in ("", "{", "[", ",", ":")):
            quote = c
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
        elif c in "}]" and stack:
            stack.pop()
            if not stack and end < 0:
                end = i
        if not c.isspace():
            prev = c
        i += 1
    if quote:
        return "the arguments end inside an unclosed string, so they look cut off", end
    if stack:
        closers = "".join(reversed(stack))
        return f"the arguments end before their closing '{closers}', so they look cut off", end
    return None, end


def truncation(text: str) -> str | None:
    """Why `text` looks cut off (an unclosed string, object or array at its end), or None."""
    return _scan(text)[0]


def parse_args(text: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Read argument text as a JSON object: ``(args, repair, error)``.

    Strict JSON first; then, for text that is not cut off, the json-repair library.
    """
    stripped = text.strip()
    if not stripped:
        return {}, None, None  # no argument text at all: no arguments
    try:
        value = json.loads(stripped)
    except ValueError:
        value = None
    else:
        if isinstance(value, dict):
            return value, None, None
        return None, None, "the arguments are valid JSON but not a JSON object"
    if len(stripped) > MAX_REPAIR_CHARS:
        return (
            None,
            None,
            f"the arguments are not valid JSON (and too long, over {MAX_REPAIR_CHARS} characters, to repair)",
        )
    fence = _FENCE.match(stripped)
    if fence:
        stripped = fence.group(1)
    if not stripped.startswith("{"):
        return None, None, "the arguments are not a JSON object (they must start with '{')"
    cut, end = _scan(stripped)
    if cut is not None:
        return None, None, cut
    if end >= 0 and stripped[end + 1 :].strip(" \t\r\n,;}]"):
        return None, None, "there is more text after the JSON object of the arguments"
    try:
        value = json_repair.loads(stripped, skip_json_loads=True)
    except Exception:
        value = None
    if not isinstance(value, dict):
        return None, None, "the arguments are not valid JSON and could not be repaired"
    return value, "repaired malformed JSON arguments", None


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
        return [value], "a list of one item"
    return value, None


def _match(
    key: str,
    facts: SchemaFacts,
    out: Mapping[str, Any],
    alias_of: Mapping[str, str],
    renamed_from: Mapping[str, str],
) -> str | None:
    """The schema argument an unknown name `key` stands for, or None."""
    canonical = alias_of.get(key)
    if canonical is None:
        canonical = facts.by_norm.get(_norm(key))
    if canonical is None:
        norm = _norm(key)
        if len(norm) >= 4:
            close = difflib.get_close_matches(
                norm, list(facts.norms.values()), n=2, cutoff=SPELLING_CUTOFF
            )
            if len(close) == 1:
                canonical = facts.by_norm.get(close[0])
    if canonical is None or canonical in out or canonical in renamed_from:
        return None  # never overwrite an argument the model gave
    return canonical


def repair_call(
    args: Mapping[str, Any] | str | None,
    schema: SchemaFacts | Mapping[str, Any],
    aliases: Mapping[str, Sequence[str]] | None = None,
    *,
    unknown_args: UnknownArgs = "drop",
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
