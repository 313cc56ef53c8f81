"""What a step answered: its `ToolMessage`s by call id, and an error answer's envelope."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage


def by_id(messages: Iterable[BaseMessage]) -> dict[str, ToolMessage]:
    """The tool answers among `messages`, by tool call id (a later answer wins)."""
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def envelope(message: ToolMessage) -> dict[str, Any]:
    """The structured error an answer carries; fails the test if it is not an error."""
    assert message.status == "error", message.content
    data: dict[str, Any] = json.loads(str(message.content))
    return data


def error_of(answers: Any, call_id: str = "c1") -> dict[str, Any]:
    """`envelope` of the answer to `call_id` (`answers`: a harness result, or `by_id`)."""
    return envelope(answers[call_id])
