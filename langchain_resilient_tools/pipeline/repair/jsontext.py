"""Reading a malformed argument text as a JSON object, only when every value survives.

`parse_args` tries, in order: strict JSON (no repair); the text inside a Markdown code
fence; a Python-literal reading (single quotes, ``True``/``None``, trailing commas:
`_literal`, a small evaluator over `ast`, never `eval`); then the json-repair library.
Before any of these, text that looks cut off (an unclosed string, object or array at its
end) or that has more text after the object is refused: repairing it would invent or
drop values.

Every repair is checked (`survives`): the strings, numbers and constants of the text,
read by a tokenizer of its own (either quote style, JSON's escapes), must be exactly the
keys and values of the result, each as often. A repair that would cut a value short,
merge two values, drop one or invent one is refused as unreadable, never used.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Hashable
from typing import Any

import json_repair

MAX_REPAIR_CHARS = 20_000
"""Longer argument text is not handed to the JSON repairer (it stays malformed)."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.S)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BARE = re.compile(r"""[^\s{}\[\]:,"']+""")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_JSON_ESCAPED = frozenset("nrtbf/\\\"'")
_ESCAPE = re.compile(r"\\(.)", re.S)
_ODD_ESCAPE = re.compile(r"\\(?:u(?![0-9a-fA-F]{4})|[^\\'\"bfnrtu])")
_CONSTANTS: dict[str, Any] = {
    "true": True, "false": False, "null": None, "True": True, "False": False, "None": None,
}  # fmt: skip
_MAX_DEPTH = 64

CUT_OFF = "so they look cut off"
NOT_KEPT = "the arguments are not valid JSON, and no repair keeps every value exactly as written"


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
        return f"the arguments end inside an unclosed string, {CUT_OFF}", end
    if stack:
        closers = "".join(reversed(stack))
        return f"the arguments end before their closing '{closers}', {CUT_OFF}", end
    return None, end


def truncation(text: str) -> str | None:
    """Why `text` looks cut off (an unclosed string, object or array at its end), or None."""
    return _scan(text)[0]


# -- the check every repair passes -----------------------------------------------------


def _unescape(raw: str) -> str:
    """The text of a quoted string as JSON reads it (an escape JSON does not know keeps
    its backslash, as Python and json-repair keep it)."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", raw[i + 2 : i + 6]):
            out.append(chr(int(raw[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt) if nxt in _JSON_ESCAPED else "\\" + nxt)
        i += 2
    return "".join(out)


def _tokens(text: str) -> Counter[Hashable] | None:
    """The strings, numbers and constants written in `text` (None: an unclosed string)."""
    out: Counter[Hashable] = Counter()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace() or c in "{}[]:,":
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return None
            out["s", _unescape(text[i + 1 : j])] += 1
            i = j + 1
        else:
            m = _BARE.match(text, i)
            if m is None:  # pragma: no cover - every other character starts a bare run
                return None
            word = m.group()
            if word in _CONSTANTS:
                out["c", _CONSTANTS[word]] += 1
            elif _NUMBER.fullmatch(word):
                out["n", float(word)] += 1
            else:
                out["s", word] += 1
            i = m.end()
    return out


def _leaves(value: Any, out: Counter[Hashable]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            out["s", str(key)] += 1
            _leaves(item, out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif isinstance(value, bool) or value is None:
        out["c", value] += 1
    elif isinstance(value, (int, float)):
        out["n", float(str(value)) if isinstance(value, int) else value] += 1
    else:
        out["s", str(value)] += 1


def survives(text: str, value: Any) -> bool:
    """Whether `value` holds exactly the strings, numbers and constants written in `text`,
    each as often (a string in either quote style, its escapes read as JSON reads them)."""
    written = _tokens(text)
    if written is None:
        return False
    read: Counter[Hashable] = Counter()
    _leaves(value, read)
    return read == written


# -- the readers ----------------------------------------------------------------------


def _literal(node: ast.AST, depth: int = 0) -> Any:
    """The JSON value of a Python-literal expression (dicts with string keys, lists,
    strings, numbers, booleans, null in either spelling); ValueError for anything else."""
    if depth > _MAX_DEPTH:
        raise ValueError("too deep")
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            key = None if key_node is None else _literal(key_node, depth + 1)
            if not isinstance(key, str):
                raise ValueError("a key that is not a string")
            out[key] = _literal(value_node, depth + 1)
        return out
    if isinstance(node, ast.List):
        return [_literal(item, depth + 1) for item in node.elts]
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Constant) and type(node.value) in (str, int, float, bool, type(None)):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        number: float = node.operand.value  # type: ignore[assignment]
        return -number if isinstance(node.op, ast.USub) else number
    raise ValueError("not a JSON-like literal")


def _python_literal(text: str) -> Any:
    """`text` read as a Python literal, or None (also for escapes Python reads otherwise
    than JSON; JSON's ``\\/`` is read as ``/``)."""
    text = _ESCAPE.sub(lambda m: "/" if m.group(1) == "/" else m.group(0), text)
    if _ODD_ESCAPE.search(text):
        return None
    try:
        return _literal(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _repaired(text: str) -> Any:
    try:
        return json_repair.loads(text, skip_json_loads=True)
    except Exception:
        return None


def parse_args(text: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Read argument text as a JSON object: ``(args, repair, error)``."""
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
    if end >= 0:
        stripped = stripped[: end + 1]
    note = "repaired malformed JSON arguments"
    for read in (json.loads, _python_literal, _repaired):
        try:
            value = read(stripped)
        except ValueError:
            continue
        if isinstance(value, dict) and survives(stripped, value):
            return value, note, None
    return None, None, NOT_KEPT
