"""The message forms of `ResilientToolNode`: what comes in, and what goes out.

In: ToolNode's input forms, plus the model's malformed calls
(``AIMessage.invalid_tool_calls``), which ToolNode skips and every one of which is
answered here; and the `ToolRuntime` of each call. Out: the answer of a finished call,
with ``handle_tool_errors`` applied as `ToolNode` applies it, and the wiring bugs only
the graph's author can fix raised as `ToolNode` raises them (the rule is in `_answer`).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel

from ..core.errors import HandledByTool, for_author
from ..core.tools import INVALID_KEY, thread_id_of
from ..pipeline import Outcome, Step
from ..state.graph import LEDGER_KEY, DroppedRecordsWarning
from ..text.envelope import failure_message, success_message
from .records import with_error_records
from .rollback import finish_node_step

try:
    from langgraph.prebuilt.tool_node import _infer_handled_types
except ImportError:  # pragma: no cover - private helper moved

    def _infer_handled_types(handler: Callable[..., str]) -> tuple[type[Exception], ...]:
        return (Exception,)


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


class MessageForms(ToolNode):
    """Input parsing and answers of `ResilientToolNode` (its base; not used alone)."""

    _handle: HandleToolErrors
    _handles_wiring: bool
    _tool_list: list[BaseTool]
    _errors_key: str | None
    _rollbacks: dict[str, int]
    _errors_dropped: DroppedRecordsWarning

    # -- input ---------------------------------------------------------------------

    def _parse_input(
        self, input: list[AnyMessage] | dict[str, Any] | BaseModel
    ) -> tuple[list[ToolCall], Literal["list", "dict", "tool_calls"]]:
        tool_calls, input_type = super()._parse_input(input)
        source: Any = input
        if input_type == "tool_calls":
            # A `Send` payload carrying one call and the state (ToolCallWithContext,
            # ``create_react_agent(version="v2")``): the model's malformed calls are
            # answered with the message's first call, by that one task.
            payload = input if isinstance(input, dict) else {}
            source = payload.get("state") if payload.get("__type") == CONTEXT_TYPE else None
            if source is None or not tool_calls:
                return tool_calls, input_type
        if isinstance(source, list):
            messages = source
        elif isinstance(source, dict):
            messages = source.get(self._messages_key, [])
        else:
            messages = getattr(source, self._messages_key, [])
        ai = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if ai is None:
            return tool_calls, input_type
        firsts = [tc["id"] for tc in ai.tool_calls[:1]]
        if input_type == "tool_calls" and firsts != [tool_calls[0]["id"]]:
            return tool_calls, input_type
        if ai.invalid_tool_calls:
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
        return tool_calls, input_type

    def _runtimes(
        self,
        input: Any,
        tool_calls: list[ToolCall],
        config: RunnableConfig,
        runtime: Runtime[Any],
    ) -> list[ToolRuntime]:
        if _READ_RUNTIME is not None:
            shared = dict(zip(_FROM_RUNTIME, _READ_RUNTIME(runtime), strict=True))
        else:
            shared = {name: getattr(runtime, name, None) for name in _FROM_RUNTIME}
        if _TAKES_TOOLS:
            shared["tools"] = self._tool_list
        return [
            ToolRuntime(
                state=cast(Any, self._extract_state(input, cfg)),
                tool_call_id=call["id"],
                config=cfg,
                **shared,
            )
            for call, cfg in zip(tool_calls, get_config_list(config, len(tool_calls)), strict=False)
        ]

    def _answer(self, outcome: Outcome) -> ToolMessage | Command[Any] | list[Any]:
        """The call's answer, with ``handle_tool_errors`` applied as `ToolNode` applies it.

        Who gets an error: what the model can act on, and what the world did, is
        answered; what only the graph's author can fix (an invalid `Command`, an
        ``InjectedStore`` tool in a graph without a store) was raised before this point
        (`for_author`), unless the author's setting catches an invalid return
        (`_catches`): then it comes here as the tool's error. ``handle_tool_errors``
        decides only for an exception that came from the tool (or from its own argument
        validation, which a tool with ``handle_validation_error`` or a node with
        ``handle_tool_errors=False`` leaves to the tool): `True` (and the default, which
        is `True` here) answers with the envelope; `False` re-raises it;
        a `str` is the content; an exception type or tuple answers those types and
        re-raises others; a callable builds the content for the types it annotates.
        Failures the pipeline found itself (timeouts, an open circuit, a duplicate, an
        unknown tool) have no such exception and are always answered with the envelope.
        An error the tool answered itself (its ``handle_tool_error``) is its own answer.
        """
        call, failure = outcome.call, outcome.failure
        if failure is None:
            return success_message(outcome.value, call)
        cause, handle = failure.cause, self._handle
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

    # -- wiring bugs: raised for the graph's author, as ToolNode raises them ----------

    def _inject_tool_args(
        self, tool_call: ToolCall, tool_runtime: ToolRuntime, tool: BaseTool | None = None
    ) -> ToolCall:
        try:
            return super()._inject_tool_args(tool_call, tool_runtime, tool)
        except Exception as exc:  # e.g. InjectedStore without a store: the author's to fix
            raise for_author(exc) from None

    def _normalize_tool_response(
        self,
        response: Any,
        tool_call: ToolCall,
        input_type: Literal["list", "dict", "tool_calls"],
    ) -> Any:
        try:
            return super()._normalize_tool_response(response, tool_call, input_type)
        except (ValueError, TypeError) as exc:  # an invalid Command or return type
            if self._catches(exc):  # the author asked: the tool's error, as in ToolNode
                raise
            raise for_author(exc) from None

    def _catches(self, exc: Exception) -> bool:
        """Whether ``handle_tool_errors``, as the author set it, catches `exc` (a wiring
        bug): `ToolNode` answers one raised while it handles a tool's return (e.g.
        "0 messages bound to tool_call_id") when its setting catches it; its default,
        like ours, raises it."""
        handle = self._handle
        if not self._handles_wiring or handle is False:
            return False
        if handle is True or isinstance(handle, str):
            return True
        if isinstance(handle, (type, tuple)):
            return isinstance(exc, handle)
        return isinstance(exc, _infer_handled_types(handle))

    # -- the end of a step: error records, ledger entries, rollbacks -----------------

    def _step_output(
        self,
        outputs: list[Any],
        input_type: Literal["list", "dict", "tool_calls"],
        input: Any,
        runtimes: list[ToolRuntime],
        config: RunnableConfig,
        step: Step,
    ) -> Any:
        """ToolNode's output of `step`, with error records to ``tool_errors``, dedup
        entries to ``tool_ledger``, and rollbacks (see `adapters.rollback`), in the graph
        state: `input`, or the state a `Send` payload carries (each call's runtime holds
        it). Nothing to do (the hot path) when every answer is a message as the tool gave
        it and no rollback is being counted."""
        output = self._combine_tool_outputs(outputs, input_type)
        state = runtimes[0].state if runtimes else input
        if (
            not self._rollbacks
            and all(type(o) is ToolMessage and not o.response_metadata for o in outputs)
            and not (isinstance(state, dict) and state.get(LEDGER_KEY))
        ):
            return output
        output = with_error_records(
            output,
            state,
            key=self._errors_key,
            messages_key=self._messages_key,
            dropped=partial(self._errors_dropped.dropped, f"ResilientToolNode {self.name!r}"),
        )
        return finish_node_step(
            output,
            input,
            step=step,
            state=state,
            messages_key=self._messages_key,
            ledger_key=LEDGER_KEY,
            memory=self._rollbacks,
            thread_id=thread_id_of(config),
        )
