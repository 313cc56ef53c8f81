"""Graph state with a place for the resilience layer's records."""

from __future__ import annotations

from typing import Annotated, Any

from langgraph.graph import MessagesState

ERRORS_KEY = "tool_errors"
"""State key that adapters append error records to, when the graph state has it."""


def append_records(
    left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Reducer for ``tool_errors``: appends, never replaces."""
    if right is None:
        return list(left or [])
    if isinstance(right, dict):
        right = [right]
    return [*(left or []), *right]


class ResilientToolsState(MessagesState):
    """`MessagesState` plus ``tool_errors``: one record per tool error, appended."""

    tool_errors: Annotated[list[dict[str, Any]], append_records]
