"""Rendering outcomes as `ToolMessage`s: the error envelope and marked successes.

This is the only module that builds the content the model reads for a finished call.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from ._call import Call
from ._classify import Failure
from ._truncate import truncate

METADATA_KEY = "resilience"
"""Key of the per-call record in ``ToolMessage.response_metadata``."""


def envelope(failure: Failure, call: Call) -> dict[str, Any]:
    """The JSON object of DESIGN.md's error envelope."""
    body: dict[str, Any] = {
        "error": failure.error.value,
        "tool": call.name,
        "message": failure.message,
        "suggestion": failure.suggestion,
        "retryable": failure.retryable,
        "attempts": call.record.attempts,
    }
    body.update(failure.extra)
    return body


def error_record(failure: Failure, call: Call) -> dict[str, Any]:
    """The entry appended to the graph state's ``tool_errors`` list."""
    return {
        "tool": call.name,
        "tool_call_id": call.id,
        "error": failure.error.value,
        "message": failure.message,
        "retryable": failure.retryable,
        "attempts": call.record.attempts,
        "at": call.record.started_at,
    }


def failure_message(failure: Failure, call: Call, content: str | None = None) -> ToolMessage:
    meta = {METADATA_KEY: call.record.as_dict(), "tool_error": error_record(failure, call)}
    return ToolMessage(
        content=content if content is not None else json.dumps(envelope(failure, call)),
        name=call.name,
        tool_call_id=call.id,
        status="error",
        response_metadata=meta,
    )


def _content_of(value: Any) -> str | list[Any]:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) and "type" in b for b in value):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _with_notices(content: str | list[Any], notices: list[str]) -> str | list[Any]:
    if not notices:
        return content
    note = "[" + " ".join(notices) + "]"
    if isinstance(content, str):
        return f"{note}\n{content}"
    return [{"type": "text", "text": note}, *content]


def success_message(value: Any, call: Call) -> ToolMessage | Command[Any]:
    """The answer for a successful call: the tool's own message, annotated."""
    if isinstance(value, Command):
        return value
    record = call.record.as_dict()
    cap = call.resolved.policy.max_result_chars
    if isinstance(value, ToolMessage):
        # Copied, never changed in place: a user's wrapper or another middleware may
        # hand out the same message again (a cache of its own).
        meta = {**value.response_metadata, METADATA_KEY: record}
        update: dict[str, Any] = {"response_metadata": meta}
        content = truncate(value.content, cap)
        if call.record.notices or content is not value.content:
            update["content"] = _with_notices(content, call.record.notices)
        return value.model_copy(update=update)
    return ToolMessage(
        content=_with_notices(truncate(_content_of(value), cap), call.record.notices),
        name=call.name,
        tool_call_id=call.id,
        response_metadata={METADATA_KEY: record},
    )
