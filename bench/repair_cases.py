"""The mistakes of the repair benchmark: one realistic model mistake at a time.

`mistakes(schema, call, rng)` yields, for one valid call of one schema, every mistake
that applies to it as a `Case`: what the model sent (arguments, or a raw argument text
that LangChain could not parse: an ``invalid_tool_call``), what it meant (the call the
tool body must receive, when repaired), and, for a refusal to count as model-fixable,
the argument name the answer must name.

Kinds the package repairs (`REPAIRABLE`): values as strings, names in another case or
with other separators, in the plural, with a typo inside a long word, trailing commas,
single quotes, Python's literals, a scalar for a one-item list, a JSON string for an
object or an array, and JSON strings inside single-quoted text. Kinds it must refuse:
another word for a name that has a sibling (``begin_date`` beside ``start_date`` and
``end_date``), a synonym, an abbreviation, an unrelated extra argument, a cut-off text,
a missing required argument. Names of the data's own language (case, word split) are
read with the package's `words`, a plain tokenizer; nothing else of the package decides
what a mistake is.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from langchain_resilient_tools.pipeline.repair.names import words

REPAIRABLE = (
    "number_as_string",
    "boolean_as_string",
    "name_case",
    "name_separator",
    "name_plural",
    "name_typo",
    "trailing_comma",
    "single_quotes",
    "python_literals",
    "scalar_for_list",
    "json_string_for_object",
    "json_string_for_array",
    "nested_json_single_quoted",
)
REFUSED = (
    "sibling_name",
    "synonym_name",
    "abbreviation",
    "unknown_extra",
    "cut_off",
    "missing_required",
)
KINDS = ("valid", *REPAIRABLE, *REFUSED)

SIBLING_WORDS = {
    "start": "begin", "end": "finish", "from": "origin", "to": "dest", "initial": "starting",
    "final": "ending", "min": "lowest", "max": "highest", "lower": "bottom", "upper": "top",
    "source": "origin", "target": "goal", "origin": "source", "destination": "target",
    "departure": "leaving", "return": "back", "in": "entry", "out": "exit", "1": "one",
    "2": "two", "3": "three", "a": "first", "b": "second", "first": "given", "last": "family",
    "date": "day", "time": "hour", "old": "previous", "new": "updated",
}  # fmt: skip
"""A different word for a word that tells two sibling parameters apart."""
SYNONYMS = {
    "location": "place", "city": "town", "quantity": "amount", "number": "count",
    "count": "number", "name": "title", "title": "name", "query": "search", "limit": "cap",
    "date": "day", "type": "kind", "category": "genre", "country": "nation", "size": "dimension",
    "price": "cost", "cost": "price", "amount": "sum", "user": "person", "id": "key",
    "year": "season", "duration": "length", "language": "locale", "email": "mail",
    "message": "text", "distance": "range", "area": "region", "region": "area",
    "company": "firm", "product": "item", "item": "product", "rate": "ratio", "total": "sum",
}  # fmt: skip
"""Another word of (about) the same meaning."""
ABBREVIATIONS = {
    "location": "loc", "number": "num", "quantity": "qty", "temperature": "temp",
    "description": "desc", "information": "info", "identifier": "id", "maximum": "max",
    "minimum": "min", "address": "addr", "message": "msg", "parameter": "param",
    "configuration": "config", "reference": "ref", "previous": "prev", "destination": "dest",
    "source": "src", "language": "lang", "amount": "amt", "category": "cat",
    "department": "dept", "document": "doc", "directory": "dir", "database": "db",
    "application": "app", "environment": "env", "frequency": "freq", "latitude": "lat",
    "longitude": "lon", "distance": "dist", "percentage": "pct", "average": "avg",
    "population": "pop", "account": "acct", "coordinates": "coords", "specification": "spec",
    "version": "ver", "organization": "org", "repository": "repo", "currency": "cur",
    "country": "ctry", "calculate": "calc", "maximum_": "max", "investment": "invest",
    "principal": "princ", "interest": "int", "initial": "init", "velocity": "vel",
    "acceleration": "accel", "region": "reg", "duration": "dur", "company": "co",
}  # fmt: skip
"""Common abbreviations; a long word with none is cut to its first four letters."""
EXTRAS: tuple[tuple[str, Any], ...] = (
    ("verbose", True), ("format", "json"), ("sort_order", "desc"), ("page", 2),
    ("timeout", 30), ("include_metadata", True), ("locale", "en-US"), ("dry_run", False),
    ("max_results", 5), ("response_style", "brief"),
)  # fmt: skip
"""Arguments a model adds that no schema asked for."""
_VOWELS = "aeiou"


@dataclass(frozen=True)
class Case:
    kind: str
    sent: dict[str, Any] | str
    """The arguments the model sent, or a raw text (an ``invalid_tool_call``)."""
    meant: dict[str, Any]
    """The call the tool body must receive when the mistake is repaired."""
    name: str | None = None
    """The argument a model-fixable refusal must name (an unknown or a missing one)."""


def _join(parts: list[str], like: str) -> str:
    """`parts` joined as `like` is (snake, kebab, camel, or one word)."""
    if "_" in like:
        return "_".join(parts)
    if "-" in like:
        return "-".join(parts)
    if like[:1].islower() and any(c.isupper() for c in like):
        return parts[0] + "".join(p.title() for p in parts[1:])
    if like[:1].isupper():
        return "".join(p.title() for p in parts)
    return "".join(parts)


def _plural(word: str) -> str:
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and len(word) > 2 and word[-2] not in _VOWELS:
        return word[:-1] + "ies"
    return word + "s"


def _typo(word: str, rng: random.Random) -> str:
    """One typing mistake inside `word`, never at its first letter."""
    i = rng.randrange(1, len(word) - 1)
    how = rng.choice(["drop", "double", "swap", "vowel"])
    if how == "vowel" and word[i] in _VOWELS:
        return word[:i] + rng.choice([v for v in _VOWELS if v != word[i]]) + word[i + 1 :]
    if how == "swap" and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if how == "double":
        return word[:i] + word[i] + word[i:]
    return word[:i] + word[i + 1 :]


def single_quoted(value: Any, *, python: bool = False) -> str:
    """`value` as JSON with single-quoted strings (Python's ``True``/``None`` if asked)."""
    if isinstance(value, dict):
        items = (f"{single_quoted(k)}: {single_quoted(v, python=python)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(single_quoted(v, python=python) for v in value) + "]"
    if isinstance(value, str):
        inner = json.dumps(value, ensure_ascii=False)[1:-1].replace('\\"', '"')
        return "'" + inner.replace("'", "\\'") + "'"
    if python and (value is None or isinstance(value, bool)):
        return repr(value)
    return json.dumps(value)


def _rename(call: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if k == old else k): v for k, v in call.items()}


def _is_param(name: str, props: dict[str, Any]) -> bool:
    """Whether `name` is a parameter's name as written, or written otherwise (the model
    named that parameter: no mistake to measure)."""
    joined = "".join(words(name))
    return any(joined == "".join(words(p)) for p in props)


def _renames(schema: dict[str, Any], call: dict[str, Any], rng: random.Random) -> Iterator[Case]:
    props: dict[str, Any] = schema["properties"]
    names = sorted(call)
    if not names:
        return
    name = rng.choice(names)
    parts = list(words(name))
    if not parts:
        return
    if len(parts) == 1:
        case = name.title() if name.islower() else name.lower()
    elif "_" in name or "-" in name or name.islower():
        case = _join(parts, "camelCase")
    else:
        case = "_".join(parts)
    variants = {
        "name_case": case,
        "name_separator": "-".join(parts) if len(parts) > 1 else name.upper(),
    }
    alpha = [i for i, p in enumerate(parts) if p.isalpha() and len(p) >= 2]
    if alpha:
        i = alpha[-1]
        variants["name_plural"] = _join([*parts[:i], _plural(parts[i]), *parts[i + 1 :]], name)
    shared = set.intersection(*(set(words(p)) for p in props)) if len(props) > 1 else set()
    long = [i for i, p in enumerate(parts) if len(p) >= 5 and p not in shared]
    if long:
        i = rng.choice(long)
        typo = _typo(parts[i], rng)
        variants["name_typo"] = _join([*parts[:i], typo, *parts[i + 1 :]], name)
    others = {p: v for p, v in props.items() if p != name}
    for kind, sent in variants.items():
        if sent != name and not _is_param(sent, others):
            yield Case(kind, _rename(call, name, sent), call)
    # Another word: for a sibling's distinguishing word, a synonym, an abbreviation.
    for kind, table in (("sibling_name", SIBLING_WORDS), ("synonym_name", SYNONYMS)):
        for candidate in rng.sample(names, len(names)):
            cparts = list(words(candidate))
            options = [i for i, w in enumerate(cparts) if w in table]
            if kind == "sibling_name":
                options = [i for i in options if _has_sibling(cparts, i, props)]
            if not options:
                continue
            i = rng.choice(options)
            sent = _join([*cparts[:i], table[cparts[i]], *cparts[i + 1 :]], candidate)
            if not _is_param(sent, props):
                yield Case(kind, _rename(call, candidate, sent), call, sent)
                break
    for candidate in rng.sample(names, len(names)):
        cparts = list(words(candidate))
        options = [i for i, w in enumerate(cparts) if w in ABBREVIATIONS or len(w) >= 7]
        if not options:
            continue
        i = rng.choice(options)
        short = ABBREVIATIONS.get(cparts[i]) or cparts[i][:4]
        sent = _join([*cparts[:i], short, *cparts[i + 1 :]], candidate)
        if not _is_param(sent, props) and sent != candidate:
            yield Case("abbreviation", _rename(call, candidate, sent), call, sent)
            break


def _has_sibling(parts: list[str], i: int, props: dict[str, Any]) -> bool:
    """Whether another parameter has the same words but the `i`-th."""
    for p in props:
        other = words(p)
        if (
            len(other) == len(parts)
            and other[i] != parts[i]
            and all(a == b for j, (a, b) in enumerate(zip(other, parts, strict=True)) if j != i)
        ):
            return True
    return False


def _unrelated(extra: str, props: dict[str, Any]) -> bool:
    ours = set(words(extra))
    return not any(ours & set(words(p)) for p in props)


def mistakes(schema: dict[str, Any], call: dict[str, Any], rng: random.Random) -> Iterator[Case]:
    """Every mistake that applies to `call` (one each), and the call itself (``valid``)."""
    props: dict[str, Any] = schema["properties"]
    yield Case("valid", call, call)
    types = {k: props[k].get("type") for k in call}
    for kind, wanted in (
        ("number_as_string", ("integer", "number")),
        ("boolean_as_string", ("boolean",)),
    ):
        keys = [k for k in call if types[k] in wanted and not isinstance(call[k], str)]
        if keys:
            k = rng.choice(keys)
            yield Case(kind, {**call, k: json.dumps(call[k])}, call)
    arrays = [k for k in call if types[k] == "array" and call[k]]
    if arrays:
        k = rng.choice(arrays)
        first = call[k][0]
        if not isinstance(first, list):
            yield Case("scalar_for_list", {**call, k: first}, {**call, k: [first]})
        yield Case("json_string_for_array", {**call, k: json.dumps(call[k])}, call)
    objects = [k for k in call if types[k] == "object" and isinstance(call[k], dict) and call[k]]
    if objects:
        k = rng.choice(objects)
        yield Case("json_string_for_object", {**call, k: json.dumps(call[k])}, call)
    nested = objects or arrays
    if nested:
        k = rng.choice(nested)
        parts = [
            f"{single_quoted(n)}: " + (single_quoted(json.dumps(v)) if n == k else single_quoted(v))
            for n, v in call.items()
        ]
        yield Case("nested_json_single_quoted", "{" + ", ".join(parts) + "}", call)
    if call:
        text = json.dumps(call)
        yield Case("trailing_comma", text[:-1] + ",}", call)
        yield Case("single_quotes", single_quoted(call), call)
        literal = single_quoted(call, python=True)
        if literal != single_quoted(call):
            yield Case("python_literals", literal, call)
        cut = rng.randrange(max(1, int(len(text) * 0.5)), len(text))
        yield Case("cut_off", text[:cut], call)
    yield from _renames(schema, call, rng)
    extras = [(k, v) for k, v in EXTRAS if _unrelated(k, props)]
    if extras:
        k, v = rng.choice(extras)
        yield Case("unknown_extra", {**call, k: v}, call, k)
    required = [r for r in schema.get("required", ()) if r in call]
    if required:
        k = rng.choice(required)
        yield Case("missing_required", {n: v for n, v in call.items() if n != k}, call, k)
