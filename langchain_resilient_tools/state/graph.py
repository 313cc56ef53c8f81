"""Graph state with a place for the resilience layer's records."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

log = logging.getLogger("langchain_resilient_tools")

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


NO_ERRORS_KEY_WARNING = (
    "%s: the graph state has no %r key, so the tool error records of this step were not "
    "kept in state (the model still got every envelope). To keep them, use "
    "ResilientToolsState, or add `%s: Annotated[list[dict], append_records]` (from "
    "langchain_resilient_tools.state.graph) to your state schema, e.g. to the "
    "`state_schema=` of create_react_agent; with create_agent, use "
    "ResilientToolsMiddleware. Pass errors_key=None to silence this. Said once per node."
)


class DroppedRecordsWarning:
    """Logs `NO_ERRORS_KEY_WARNING` once for its owner (a node) when records are dropped."""

    __slots__ = ("warned",)

    def __init__(self) -> None:
        self.warned = False

    def dropped(self, owner: str, key: str) -> None:
        if not self.warned:
            self.warned = True
            log.warning(NO_ERRORS_KEY_WARNING, owner, key, key)


LEDGER_KEY = "tool_ledger"
"""State key of the ledger: ``{"dedup": {key: entry}, "rollbacks": n}``."""

LEDGER_MAX_ENTRIES = 1000
"""Dedup entries kept in graph state; the oldest are dropped first."""


def merge_ledger(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for ``tool_ledger``: merges section by section, newest entries last.

    A mapping value (``dedup``) is merged key by key and capped at `LEDGER_MAX_ENTRIES`;
    any other value (the ``rollbacks`` counter) is replaced.
    """
    out = dict(left or {})
    for name, value in (right or {}).items():
        old = out.get(name)
        if isinstance(value, dict) and isinstance(old, dict):
            merged = dict(old)
            for k, v in value.items():
                merged.pop(k, None)  # re-insert: most recently written last
                merged[k] = v
            if len(merged) > LEDGER_MAX_ENTRIES:
                merged = dict(list(merged.items())[-LEDGER_MAX_ENTRIES:])
            out[name] = merged
        else:
            out[name] = value
    return out


if TYPE_CHECKING:
    from langgraph.graph import MessagesState

    class ResilientToolsState(MessagesState):
        """`MessagesState` plus ``tool_errors`` (one record per tool error, appended) and
        ``tool_ledger`` (dedup entries and the rollback counter, merged)."""

        tool_errors: Annotated[list[dict[str, Any]], append_records]
        tool_ledger: Annotated[dict[str, Any], merge_ledger]

else:

    def __getattr__(name: str) -> Any:
        # Made on first use: `langgraph.graph` is slow to import, and the stages that
        # import this module for its keys (the wrapper's path) do not need the class.
        if name != "ResilientToolsState":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from langgraph.graph import MessagesState

        class ResilientToolsState(MessagesState):
            """`MessagesState` plus ``tool_errors`` (one record per tool error, appended)
            and ``tool_ledger`` (dedup entries and the rollback counter, merged)."""

            tool_errors: Annotated[list[dict[str, Any]], append_records]
            tool_ledger: Annotated[dict[str, Any], merge_ledger]

        ResilientToolsState.__qualname__ = "ResilientToolsState"
        globals()[name] = ResilientToolsState
        return ResilientToolsState
