"""Test doubles for agents built on this package: a scripted chat model.

`ScriptedChatModel` plays back a fixed list of `AIMessage`s, one per model call, and
accepts `bind_tools`, so `create_agent` and hand-built graphs run offline. With
``per_turn=True`` it plays the script from its start on every user turn of every
conversation, which is what a served graph needs (LangGraph Server runs every thread
through the one model object the graph was built with).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next scripted `AIMessage` (the last one repeats)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: Sequence[AIMessage]
    _index: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    """The messages each call was given, in order (for assertions)."""
    per_turn: bool = False
    """Pick the reply by the conversation instead of a counter: the number of AI messages
    after the last human message. Every user turn of every thread then plays the script
    from its start, however many conversations share the model (a served graph)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[Any, BaseMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self.seen.append(list(messages))
            i = _turn_position(messages) if self.per_turn else self._index
            i = min(i, len(self.script) - 1)
            self._index += 1
        message = self.script[i].model_copy()
        return ChatResult(generations=[ChatGeneration(message=message)])


def _turn_position(messages: Sequence[BaseMessage]) -> int:
    """How many AI messages follow the last human message (the script position)."""
    position = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        position += isinstance(message, AIMessage)
    return position


def tool_call(name: str, args: dict[str, Any] | None = None, *, id: str) -> dict[str, Any]:
    """A tool call dict, as a model would emit it."""
    return {"name": name, "args": args or {}, "id": id, "type": "tool_call"}


def invalid_call(
    name: str | None, raw: str, *, id: str, error: str = "invalid JSON"
) -> dict[str, Any]:
    """An invalid tool call, as LangChain records a call whose arguments did not parse."""
    return {"name": name, "args": raw, "id": id, "error": error, "type": "invalid_tool_call"}
