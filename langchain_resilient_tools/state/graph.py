"""Graph state with a place for the resilience layer's records."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

log = logging.getLogger("langchain_resilient_tools")

ERRORS_KEY = "tool_errors"
"""State key that adapters append error records to, when the graph state has it."""


ERRORS_MAX_RECORDS = 100
"""Error records kept in ``tool_errors``: the newest, so that a long thread's state stays
bounded (500 turns with one failing call each would otherwise keep 500 records, and
trimming the messages does not trim them). When older records are dropped, the first
record kept says how many under `DROPPED_KEY`."""

DROPPED_KEY = "dropped_before"
"""Key of the first kept ``tool_errors`` record: how many earlier records were dropped
(the thread's whole count, over every time the list was cut)."""


def append_records(
    left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Reducer for ``tool_errors``: appends, never replaces, and keeps the newest
    `ERRORS_MAX_RECORDS` records; the first one kept then counts the dropped ones
    (`DROPPED_KEY`), a copy: a record already in a checkpoint is never changed."""
    if right is None:
        return list(left or [])
    if isinstance(right, dict):
        right = [right]
    records = [*(left or []), *right]
    cut = len(records) - ERRORS_MAX_RECORDS
    if cut <= 0:
        return records
    before = records[0].get(DROPPED_KEY) if isinstance(records[0], dict) else None
    kept = records[cut:]
    if isinstance(kept[0], dict):
        kept[0] = {**kept[0], DROPPED_KEY: (before if isinstance(before, int) else 0) + cut}
    return kept


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


def has_ledger(state: Any) -> bool:
    """Whether the graph state keeps a ledger (``tool_ledger``)."""
    if type(state) is dict:  # the usual state: no ABC check (it costs on every call)
        return LEDGER_KEY in state
    return isinstance(state, Mapping) and LEDGER_KEY in state


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
