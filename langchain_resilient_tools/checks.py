"""Result checks: flag a tool result that "succeeded" but is useless.

A check is any callable ``(content) -> str | None``: it gets the result's content (the
`ToolMessage` content, or the tool's raw return value) and returns a short reason when
the result is useless, else `None`. Put checks in `ResultChecks.checks`; what
happens when one fires is `ResultChecks.on_low_quality` (``retry``, ``feedback`` or
``rollback``)::

    from langchain_resilient_tools import ToolPolicy
    from langchain_resilient_tools.checks import empty_field, empty_result, error_prefix

    policy = ToolPolicy(result_checks=[empty_result, empty_field("organic"), error_prefix()])

String content that holds JSON is parsed before it is judged. A check marked with
`wants_message` receives the whole result instead (e.g. a `ToolMessage`, to see its
artifact); `mcp_is_error` is one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, TypeVar

__all__ = [
    "DEFAULT_ERROR_PREFIXES",
    "Check",
    "empty_field",
    "empty_result",
    "error_prefix",
    "mcp_is_error",
    "wants_message",
]

Check = Callable[[Any], "str | None"]
"""A result check: returns a reason when the result is useless, else `None`."""

DEFAULT_ERROR_PREFIXES: tuple[str, ...] = ("Unknown tool:", "Error executing tool", "Error:")
"""Text that tools and frameworks put at the start of an error passed off as a result."""

_MISSING = object()
F = TypeVar("F", bound=Callable[..., Any])


def wants_message(check: F) -> F:
    """Mark `check` to receive the whole result (e.g. the `ToolMessage`), not its content."""
    check.__lrt_wants_message__ = True  # type: ignore[attr-defined]
    return check


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts = [
            b if isinstance(b, str) else b.get("text")
            for b in content
            if isinstance(b, str) or (isinstance(b, Mapping) and isinstance(b.get("text"), str))
        ]
        if len(texts) == len(content):
            return "\n".join(t for t in texts if isinstance(t, str))
    return None


def as_data(content: Any) -> Any:
    """`content` with JSON text parsed (text that is not JSON is returned as it is).

    Parses are cached and shared between checks: treat the result as read-only."""
    text = _text(content)
    if text is None:
        return content
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"') or stripped in ("null", "true", "false"):
        parsed = _parse(stripped)
        return text if parsed is _MISSING else parsed
    return text


@lru_cache(maxsize=4)
def _parse(text: str) -> Any:
    """Parsed JSON, or `_MISSING`; cached, as several checks judge the same result."""
    try:
        return json.loads(text)
    except ValueError:
        return _MISSING


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple, dict, set)):
        return len(value) == 0
    return False


def empty_result(content: Any) -> str | None:
    """Fires on None, an empty or blank string, ``[]`` and ``{}`` (also as JSON text)."""
    if _is_empty(content) or _is_empty(as_data(content)):
        return "the result is empty"
    return None


def _lookup(data: Any, path: Sequence[str]) -> Any:
    for part in path:
        if isinstance(data, Mapping):
            data = data.get(part, _MISSING)
        elif isinstance(data, list) and part.lstrip("-").isdigit():
            index = int(part)
            data = data[index] if -len(data) <= index < len(data) else _MISSING
        else:
            return _MISSING
        if data is _MISSING:
            return _MISSING
    return data


def empty_field(path: str) -> Check:
    """A check that fires when the JSON field at `path` (dotted, e.g. ``"data.items"`` or
    ``"results.0.title"``) is missing or empty. Results that are not JSON pass."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("empty_field takes a dotted path such as 'organic'")
    parts = tuple(path.strip().split("."))

    def check(content: Any) -> str | None:
        data = as_data(content)
        if not isinstance(data, (Mapping, list)):
            return None
        value = _lookup(data, parts)
        if value is _MISSING:
            return f"the result has no '{path}' field"
        if _is_empty(value):
            return f"the '{path}' field of the result is empty"
        return None

    check.__name__ = f"empty_field({path!r})"
    return check


def error_prefix(*prefixes: str) -> Check:
    """A check that fires when the result text starts with one of `prefixes`
    (default `DEFAULT_ERROR_PREFIXES`): an error passed off as a successful result."""
    chosen = tuple(prefixes) or DEFAULT_ERROR_PREFIXES
    if not all(isinstance(p, str) and p for p in chosen):
        raise ValueError("error_prefix takes non-empty strings")

    def check(content: Any) -> str | None:
        text = _text(content)
        if text is None:
            return None
        head = text.lstrip()
        for prefix in chosen:
            if head.startswith(prefix):
                return f"the result is an error message (it starts with {prefix!r})"
        return None

    check.__name__ = "error_prefix"
    return check


def _flagged(obj: Any) -> bool:
    if isinstance(obj, Mapping):
        return obj.get("isError") is True or obj.get("is_error") is True
    return getattr(obj, "isError", None) is True


@wants_message
def mcp_is_error(result: Any) -> str | None:
    """Fires on an MCP ``CallToolResult`` (object, dict or JSON text) with ``isError``
    true, or a `ToolMessage` whose artifact is one."""
    artifact = getattr(result, "artifact", None)
    content = getattr(result, "content", _MISSING) if hasattr(result, "tool_call_id") else result
    for candidate in (artifact, content, as_data(content)):
        if candidate is not None and candidate is not _MISSING and _flagged(candidate):
            return "the MCP server flagged the result as an error (isError)"
    return None
