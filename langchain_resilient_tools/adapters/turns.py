"""The step of a `create_agent` turn: the AIMessage a graph state ends with, whose calls
run now, as the pipeline's `Step` (for `ResilientToolsMiddleware`, which sees one call
at a time, each with the state).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from cachetools import LRUCache
from langchain_core.messages import AIMessage, ToolMessage

from ..pipeline import Pipeline, Step


def last_turn(messages: Sequence[Any]) -> tuple[AIMessage, frozenset[str]] | None:
    """The AIMessage whose calls run now, and the ids of its calls already answered.

    Other middleware's ``after_model`` may answer some calls before the tools run (a
    call over `ToolCallLimitMiddleware`'s limit, one a person rejected, one the model
    could not format): their `ToolMessage`s then follow the AIMessage in the state.
    """
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage) and message.tool_calls:
            return message, frozenset(answered)
        else:
            return None
    return None


class TurnSteps:
    """The `Step` of the turn a graph state ends with, opened once per message (a few
    recent ones are kept; thread-safe): its calls are those not answered yet. Outside a
    turn, the pipeline's loose step."""

    __slots__ = ("_lock", "_pipeline", "_seen")

    def __init__(self, pipeline: Pipeline, size: int = 64) -> None:
        self._pipeline = pipeline
        self._lock = threading.Lock()
        self._seen: LRUCache[Hashable, Step] = LRUCache(size)

    def __call__(self, state: Any) -> Step:
        messages = state.get("messages") if isinstance(state, Mapping) else None
        turn = last_turn(messages) if isinstance(messages, list) else None
        calls = [tc for tc in turn[0].tool_calls if tc["id"] not in turn[1]] if turn else []
        if turn is None or not calls:
            return self._pipeline.loose_step
        ai, answered = turn
        key: Hashable = (
            (ai.id, len(calls), answered) if ai.id else tuple(str(tc["id"]) for tc in calls)
        )
        with self._lock:
            step = self._seen.get(key)
        if step is None:
            ids = (str(tc["id"]) for tc in calls)
            step_id = f"message:{ai.id}" if ai.id else "calls:" + "\x1f".join(ids)
            step = self._pipeline.open_step(calls, state, step_id=step_id)
            with self._lock:
                self._seen[key] = step
        return step
