"""Routing on recent tool errors, for `StateGraph.add_conditional_edges`.

"Recent" means the errors of the last tool step: the records in ``tool_errors`` (see
`ResilientToolsState`) whose ``tool_call_id`` belongs to the last `AIMessage` that
made tool calls::

    from langchain_resilient_tools.routing import route_on_tool_errors

    graph.add_conditional_edges(
        "tools",
        route_on_tool_errors("fallback_agent", "agent", errors=["circuit_open", "timeout"]),
        ["fallback_agent", "agent"],
    )
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from langchain_core.messages import AIMessage

from .core.errors import ToolErrorType, UsageError
from .state.graph import ERRORS_KEY

__all__ = ["recent_tool_errors", "route_on_tool_errors"]


def _get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def recent_tool_errors(
    state: Any, *, errors_key: str = ERRORS_KEY, messages_key: str = "messages"
) -> list[dict[str, Any]]:
    """The error records of the last tool step in `state` (a dict or a state object)."""
    records = _get(state, errors_key) or []
    messages = _get(state, messages_key) or []
    last = next(
        (msg for msg in reversed(messages) if isinstance(msg, AIMessage) and msg.tool_calls),
        None,
    )
    if last is None:
        return []
    ids = {tc["id"] for tc in last.tool_calls} | {
        tc.get("id") for tc in last.invalid_tool_calls if tc.get("id")
    }
    return [dict(r) for r in records if isinstance(r, Mapping) and r.get("tool_call_id") in ids]


def route_on_tool_errors(
    on_error: str,
    otherwise: str,
    *,
    errors: Collection[str | ToolErrorType] | None = None,
    tools: Collection[str] | None = None,
    min_errors: int = 1,
    errors_key: str = ERRORS_KEY,
    messages_key: str = "messages",
) -> Callable[[Any], str]:
    """A router: `on_error` when the last tool step had at least `min_errors` errors
    (of the `errors` types, from the `tools`, when given), else `otherwise`."""
    if min_errors < 1:
        raise UsageError("min_errors must be at least 1")
    try:
        wanted = None if errors is None else {ToolErrorType(e).value for e in errors}
    except ValueError as exc:
        raise UsageError(f"errors takes ToolErrorType values: {exc}") from None
    names = None if tools is None else set(tools)

    def route(state: Any) -> str:
        hits = [
            r
            for r in recent_tool_errors(state, errors_key=errors_key, messages_key=messages_key)
            if (wanted is None or r.get("error") in wanted)
            and (names is None or r.get("tool") in names)
        ]
        return on_error if len(hits) >= min_errors else otherwise

    return route
