"""Test doubles for agents built on this package: a scripted chat model.

`ScriptedChatModel` plays back a fixed list of `AIMessage`s, one per model call, and
accepts `bind_tools`, so `create_agent` and hand-built graphs run offline.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
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
            i = min(self._index, len(self.script) - 1)
            self._index += 1
        message = self.script[i].model_copy()
        return ChatResult(generations=[ChatGeneration(message=message)])


def tool_call(name: str, args: dict[str, Any] | None = None, *, id: str) -> dict[str, Any]:
    """A tool call dict, as a model would emit it."""
    return {"name": name, "args": args or {}, "id": id, "type": "tool_call"}


def invalid_call(
    name: str | None, raw: str, *, id: str, error: str = "invalid JSON"
) -> dict[str, Any]:
    """An invalid tool call, as LangChain records a call whose arguments did not parse."""
    return {"name": name, "args": raw, "id": id, "error": error, "type": "invalid_tool_call"}
