"""The message forms of `ResilientToolNode`: what comes in, and what goes out.

In: ToolNode's input forms, plus the model's malformed calls
(``AIMessage.invalid_tool_calls``), which ToolNode skips and every one of which is
answered (`with_invalid_calls`); and the `ToolRuntime` of each call (`runtimes`).
Out: the answer of a finished call, with ``handle_tool_errors`` applied as `ToolNode`
applies it, and the wiring bugs only the graph's author can fix raised as `ToolNode`
raises them (`ErrorAnswers`).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command

from ..core.errors import HandledByTool
from ..core.tools import INVALID_KEY
from ..pipeline import Outcome
from ..text.envelope import failure_message, success_message

try:
    from langgraph.prebuilt.tool_node import _infer_handled_types
except ImportError:  # pragma: no cover - private helper moved

    def _infer_handled_types(handler: Callable[..., str]) -> tuple[type[Exception], ...]:
        return (Exception,)


InputType = Literal["list", "dict", "tool_calls"]
CONTEXT_TYPE = "tool_call_with_context"
"""``__type`` of LangGraph's `ToolCallWithContext` (a `Send` payload with the state)."""
HandleToolErrors = bool | str | Callable[..., str] | type[Exception] | tuple[type[Exception], ...]
_RUNTIME_FIELDS = frozenset(f.name for f in dataclasses.fields(ToolRuntime))
_FROM_RUNTIME = tuple(
    name
    for name in ("context", "store", "stream_writer", "execution_info", "server_info")
    if name in _RUNTIME_FIELDS
)
"""What every `ToolRuntime` of a step takes from the step's `Runtime` (per version)."""
_READ_RUNTIME = (
    operator.attrgetter(*_FROM_RUNTIME)
    if len(_FROM_RUNTIME) > 1
    and set(_FROM_RUNTIME) <= {f.name for f in dataclasses.fields(Runtime)}
    else None
)
"""Reads them at once, when this version's `Runtime` has them all."""
_TAKES_TOOLS = "tools" in _RUNTIME_FIELDS


def with_invalid_calls(
    tool_calls: list[ToolCall], input_type: InputType, input: Any, messages_key: str
) -> list[ToolCall]:
    """`tool_calls` (ToolNode's parse of `input`) followed by the model's malformed calls
    of the same message, each marked (`INVALID_KEY`) to be answered as a call."""
    source: Any = input
    if input_type == "tool_calls":
        # A `Send` payload carrying one call and the state (ToolCallWithContext,
        # ``create_react_agent(version="v2")``): the model's malformed calls are
        # answered with the message's first call, by that one task.
        payload = input if isinstance(input, dict) else {}
        source = payload.get("state") if payload.get("__type") == CONTEXT_TYPE else None
        if source is None or not tool_calls:
            return tool_calls
    if isinstance(source, list):
        messages = source
    elif isinstance(source, dict):
        messages = source.get(messages_key, [])
    else:
        messages = getattr(source, messages_key, [])
    ai = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if ai is None or not ai.invalid_tool_calls:
        return tool_calls
    if input_type == "tool_calls" and [tc["id"] for tc in ai.tool_calls[:1]] != [
        tool_calls[0]["id"]
    ]:
        return tool_calls
    seen = {tc["id"] for tc in tool_calls}
    tool_calls = list(tool_calls)
    for bad in ai.invalid_tool_calls:
        if bad.get("id") and bad["id"] not in seen:
            marked: dict[str, Any] = {
                "name": bad.get("name") or "",
                "args": {},
                "id": bad["id"],
                "type": "tool_call",
                INVALID_KEY: {"args": bad.get("args"), "error": bad.get("error")},
            }
            tool_calls.append(marked)  # type: ignore[arg-type]
    return tool_calls


def runtimes(
    tool_calls: Sequence[ToolCall],
    config: RunnableConfig,
    runtime: Runtime[Any],
    state_of: Callable[[RunnableConfig], Any],
    tools: list[BaseTool],
) -> list[ToolRuntime]:
    """The `ToolRuntime` of each call of a step (`state_of(config)`: the graph state a
    call sees, ToolNode's `_extract_state`)."""
    if _READ_RUNTIME is not None:
        shared = dict(zip(_FROM_RUNTIME, _READ_RUNTIME(runtime), strict=True))
    else:
        shared = {name: getattr(runtime, name, None) for name in _FROM_RUNTIME}
    if _TAKES_TOOLS:
        shared["tools"] = tools
    return [
        ToolRuntime(state=cast(Any, state_of(cfg)), tool_call_id=call["id"], config=cfg, **shared)
        for call, cfg in zip(tool_calls, get_config_list(config, len(tool_calls)), strict=False)
    ]


class ErrorAnswers:
    """How a finished call is answered, by the node's ``handle_tool_errors``.

    Who gets an error: what the model can act on, and what the world did, is answered;
    what only the graph's author can fix (an invalid `Command`, an ``InjectedStore``
    tool in a graph without a store) is raised (`core.errors.for_author`), unless the
    author's setting catches an invalid return (`catches`): then it comes to `answer`
    as the tool's error. ``handle_tool_errors`` decides only for an exception that came
    from the tool (or from its own argument validation, which a tool with
    ``handle_validation_error`` or a node with ``handle_tool_errors=False`` leaves to
    the tool): `True` (and the default `None`) answers with the envelope; `False`
    re-raises it; a `str` is the content; an exception type or tuple answers those
    types and re-raises others; a callable builds the content for the types it
    annotates. Failures the pipeline found itself (timeouts, an open circuit, a
    duplicate, an unknown tool) have no such exception and are always answered with
    the envelope. An error the tool answered itself (its ``handle_tool_error``) is its
    own answer.
    """

    __slots__ = ("handle", "handles_wiring")

    def __init__(self, handle_tool_errors: HandleToolErrors | None) -> None:
        self.handle: HandleToolErrors = True if handle_tool_errors is None else handle_tool_errors
        self.handles_wiring = handle_tool_errors is not None
        """Whether the author asked (not the default): then wiring bugs may be caught."""

    def answer(self, outcome: Outcome) -> ToolMessage | Command[Any] | list[Any]:
        """The call's answer, with ``handle_tool_errors`` applied as `ToolNode` applies it."""
        call, failure = outcome.call, outcome.failure
        if failure is None:
            return success_message(outcome.value, call)
        cause, handle = failure.cause, self.handle
        if cause is None or handle is True or isinstance(cause, HandledByTool):
            return failure_message(failure, call)
        if handle is False:
            raise cause
        if isinstance(handle, str):
            return failure_message(failure, call, content=handle)
        if isinstance(handle, (type, tuple)):
            if isinstance(cause, handle):
                return failure_message(failure, call)
            raise cause
        if isinstance(cause, _infer_handled_types(handle)):
            return failure_message(failure, call, content=str(handle(cause)))
        raise cause

    def catches(self, exc: Exception) -> bool:
        """Whether ``handle_tool_errors``, as the author set it, catches `exc` (a wiring
        bug): `ToolNode` answers one raised while it handles a tool's return (e.g.
        "0 messages bound to tool_call_id") when its setting catches it; its default,
        like ours, raises it."""
        handle = self.handle
        if not self.handles_wiring or handle is False:
            return False
        if handle is True or isinstance(handle, str):
            return True
        if isinstance(handle, (type, tuple)):
            return isinstance(exc, handle)
        return isinstance(exc, _infer_handled_types(handle))
