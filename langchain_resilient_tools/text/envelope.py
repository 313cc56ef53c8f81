"""Rendering outcomes as `ToolMessage`s: the error envelope and marked successes.

This is the only module that builds the content the model reads for a finished call.
"""

from __future__ import annotations

import json
from typing import Any, cast

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from ..core.call import Call
from ..core.errors import HandledByTool, ToolErrorType
from . import messages as m
from .classify import Failure
from .redact import redact
from .reported import redacted
from .truncate import truncate

METADATA_KEY = "resilience"
"""Key of the per-call record in ``ToolMessage.response_metadata``."""
ERROR_META = "tool_error"
"""Key of an envelope's error record (appended to the state's ``tool_errors``)."""
OWN_ERROR_META = "lrt_tool_error"
"""Private key of the error record of an answer whose text is the tool's or the graph
author's own: taken off before the answer leaves the adapter."""


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
    """The error answer: the envelope, or a text of the graph's own making.

    `content` is the graph author's own text (``handle_tool_errors`` given as a string or
    a callable); a `HandledByTool` cause carries the tool's own answer. Either is shown
    exactly as `ToolNode` shows it, and its error record rides under a private key that
    the adapter takes off (`take_error_record`). The envelope's message carries the
    record and the ``tool_error`` entry in its metadata.
    """
    own = failure.cause.answer if isinstance(failure.cause, HandledByTool) else None
    if own is not None or content is not None:
        meta: dict[str, Any] = {OWN_ERROR_META: error_record(failure, call)}
        if call.resolved.policy.output.attach_record:
            meta[METADATA_KEY] = call.record.as_dict()
        if own is not None:
            update: dict[str, Any] = {"response_metadata": {**own.response_metadata, **meta}}
            update.update(_for_call(own, call))
            scrubbed = _scrubbed(own.content, call)
            if scrubbed is not own.content:
                update["content"] = scrubbed
            return own.model_copy(update=update)
        return ToolMessage(
            content=content, name=call.name, tool_call_id=call.id, status="error",
            response_metadata=meta,
        )  # fmt: skip
    meta = {METADATA_KEY: call.record.as_dict(), ERROR_META: error_record(failure, call)}
    return ToolMessage(
        content=json.dumps(envelope(failure, call)),
        name=call.name,
        tool_call_id=call.id,
        status="error",
        response_metadata=meta,
    )


def _scrub_text(text: str, call: Call | None = None) -> str:
    """`text` as it is, unless redaction finds something to take out (a secret, a
    traceback, a code location, a host path): then the redacted text. The tool wrote
    this text for `call`'s model (an MCP ``isError`` result): the paths the model sent
    and those the text names as where the call may go stay (`reported.redacted`).
    Without a call (a person's note) only secrets go."""
    limit = max(len(text), 300)
    if call is None:
        clean = redact(text, limit=limit, paths=False)
    else:
        clean = redacted(text, call, limit=limit, for_model=True)
    return text if clean == " ".join(text.split()) else clean


def _scrubbed(content: str | list[Any], call: Call) -> str | list[Any]:
    """A tool's own error text with secrets and internals taken out (the same object
    when there is nothing to take out)."""
    if isinstance(content, str):
        clean = _scrub_text(content, call)
        return content if clean == content else clean
    out: list[Any] = []
    for block in content:
        if isinstance(block, str):
            block = _scrub_text(block, call)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            text = _scrub_text(block["text"], call)
            block = block if text == block["text"] else {**block, "text": text}
        out.append(block)
    return content if out == content else out


def take_error_record(message: Any) -> dict[str, Any] | None:
    """The error record an answer carries, if any; a private one is taken off it."""
    if not isinstance(message, ToolMessage) or not message.response_metadata:
        return None
    meta = message.response_metadata
    record: dict[str, Any] | None = meta.pop(OWN_ERROR_META, None) or meta.get(ERROR_META)
    return record


def content_of(value: Any) -> str | list[Any]:
    """A tool's result as a ToolMessage's content: a string or a list of content blocks
    as they are, anything else as JSON (or its ``str`` when it is not JSON-able)."""
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


def untouched(call: Call) -> bool:
    """Whether the layer did nothing visible to the call: its first attempt answered at
    once (no wait for a slot), nothing was repaired, reused, cached, substituted or noted."""
    record = call.record
    return (
        record.attempts <= 1
        and record.served_by == "tool"
        and not record.repairs
        and not record.notices
        and not record.queued_ms
    )


def is_message_list(value: Any) -> bool:
    """A tool's list of `Command`s and/or `ToolMessage`s (a form ToolNode supports)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, (Command, ToolMessage)) for v in value)
    )


def as_it_came(value: Any, call: Call) -> bool:
    """Whether `success_message` answers `call` with `value` itself: the tool's own
    ToolMessage, from a call the layer did nothing visible to, whose policy asks for
    no record and no cap (the hot path: checked without building anything)."""
    if type(value) is not ToolMessage or value.tool_call_id != call.id or not untouched(call):
        return False  # another call's id: answered for its own by `success_message`
    resolved = call.resolved
    return not resolved.attach_record and resolved.max_chars is None


def _for_call(message: ToolMessage, call: Call) -> dict[str, Any]:
    """The update that makes `message` answer `call`: a tool that returned a ToolMessage
    for another id would leave `call` unanswered (invariant 1), so its content, status
    and artifact answer `call`'s own id (ToolNode passes it on as it came), as a new
    message (no message id: a message kept and returned again would replace its first)."""
    if not call.id or message.tool_call_id == call.id:
        return {}
    return {"tool_call_id": call.id, "id": None}


def success_message(value: Any, call: Call) -> ToolMessage | Command[Any] | list[Any]:
    """The answer for a successful call: the tool's own message, annotated when the
    layer did something (or `Output.attach_record` asks for it), else unchanged."""
    if as_it_came(value, call):  # the hot path: a healthy call the layer left alone
        return cast("ToolMessage", value)
    if isinstance(value, Command) or is_message_list(value):
        return cast("Command[Any] | list[Any]", value)  # validated by ToolNode; answers itself
    resolved = call.resolved
    cap = resolved.max_chars
    if isinstance(value, ToolMessage):
        content = truncate(value.content, cap)
        cut = content is not value.content
        attach = resolved.attach_record or cut or not untouched(call)
        update: dict[str, Any] = _for_call(value, call)
        if not attach:
            return value.model_copy(update=update) if update else value
        # Copied, never changed in place: a user's wrapper or another middleware may
        # hand out the same message again (a cache of its own).
        meta = {**value.response_metadata, METADATA_KEY: call.record.as_dict()}
        update["response_metadata"] = meta
        if call.record.notices or cut:
            update["content"] = _with_notices(content, call.record.notices)
        return value.model_copy(update=update)
    raw = content_of(value)
    content = truncate(raw, cap)
    attach = resolved.attach_record or content is not raw or not untouched(call)
    return ToolMessage(
        content=_with_notices(content, call.record.notices),
        name=call.name,
        tool_call_id=call.id,
        response_metadata={METADATA_KEY: call.record.as_dict()} if attach else {},
    )


def confirmed_by_person(message: ToolMessage, result: Any) -> ToolMessage:
    """The answer to a write a person confirmed took effect, with the `result` they gave,
    in place of its ``unknown_outcome`` envelope `message` (no error record any more)."""
    meta = {k: v for k, v in message.response_metadata.items() if k != ERROR_META}
    record = meta.get(METADATA_KEY)
    if isinstance(record, dict):
        meta[METADATA_KEY] = {**record, "served_by": "person", "outcome": "success", "error": None}
    return ToolMessage(
        content=_with_notices(content_of(result), [m.HUMAN_DONE_NOTICE]),
        name=message.name,
        tool_call_id=message.tool_call_id,
        response_metadata=meta,
    )


def given_up_by_person(message: ToolMessage, note: str | None) -> ToolMessage:
    """The ``unknown_outcome`` envelope `message`, saying a person chose not to run the
    write again (with their `note`); its error record says so too."""
    try:
        body = json.loads(cast(str, message.content))
    except (TypeError, ValueError):
        body = {"error": ToolErrorType.UNKNOWN_OUTCOME.value, "tool": message.name}
    extra = m.HUMAN_NOTE.format(note=_scrub_text(note)) if note else ""
    body["message"] = m.HUMAN_GAVE_UP.format(tool=message.name) + extra
    body["suggestion"] = m.HUMAN_GAVE_UP_HINT
    body["retryable"] = False
    body["decided_by"] = "person"
    meta = dict(message.response_metadata)
    if isinstance(meta.get(ERROR_META), dict):
        meta[ERROR_META] = {
            **meta[ERROR_META], "message": body["message"], "retryable": False,
            "decided_by": "person",
        }  # fmt: skip
    return message.model_copy(update={"content": json.dumps(body), "response_metadata": meta})
