"""Calls the model could not format (``AIMessage.invalid_tool_calls``), under
`create_agent`: they never reach the tool node, so the middleware's ``after_model``
answers them here. One whose arguments can be repaired is moved into the message's
``tool_calls`` (same id) and runs like any other, its repairs carried to the call
(`Repaired`, by call id); the others are answered with ``malformed_call``, and the
agent goes back to the model when no call is left to run.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall, ToolMessage
from langchain_core.tools import BaseTool

from ..core.call import Call
from ..pipeline import Pipeline, Repaired, repair_call, tool_schema
from ..state.graph import ERRORS_KEY
from ..text.envelope import failure_message, take_error_record


def _never_runs(call: Call) -> Any:
    raise AssertionError("a malformed call is answered before it could run")


def answer_invalid_calls(
    pipeline: Pipeline,
    tools: Mapping[str, BaseTool],
    carried: MutableMapping[str, Repaired],
    state: Mapping[str, Any],
) -> dict[str, Any] | None:
    """The state update answering the last AIMessage's invalid calls, if it has any."""
    messages = state["messages"]
    # Another middleware's after_model may have answered calls first (a limit, a person).
    last = next((m for m in reversed(messages) if not isinstance(m, ToolMessage)), None)
    if not isinstance(last, AIMessage) or not last.invalid_tool_calls:
        return None
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    names = list(tools)
    replies: list[ToolMessage] = []
    moved: list[ToolCall] = []
    for bad in last.invalid_tool_calls:
        if not bad.get("id") or bad["id"] in answered:
            continue
        fixed = _repaired(pipeline, tools, carried, bad)
        if fixed is not None:  # runs like any other call, answered under its own id
            moved.append(fixed)
            continue
        call = pipeline.new_call(
            call_id=bad["id"] or "",
            name=bad.get("name") or "",
            args={},
            tool=tools.get(bad.get("name") or ""),
            valid_tools=names,
            raw_args=bad.get("args"),
            parse_error=bad.get("error") or "the arguments are not valid JSON",
            passthrough_unknown=True,
        )
        call.run = _never_runs
        outcome = pipeline.run(call)
        assert outcome.failure is not None
        replies.append(failure_message(outcome.failure, outcome.call))
    if not replies and not moved:
        return None
    update: dict[str, Any] = {"messages": replies}
    if replies:
        update[ERRORS_KEY] = [take_error_record(r) for r in replies]
    if moved:  # the same id, so that add_messages replaces the model's message
        ids = {tc["id"] for tc in moved}
        fixed_ai = last.model_copy(
            update={
                "tool_calls": [*last.tool_calls, *moved],
                "invalid_tool_calls": [
                    b for b in last.invalid_tool_calls if b.get("id") not in ids
                ],
            }
        )
        update["messages"] = [fixed_ai, *replies]
    if not last.tool_calls and not moved:
        update["jump_to"] = "model"
    return update


def _repaired(
    pipeline: Pipeline,
    tools: Mapping[str, BaseTool],
    carried: MutableMapping[str, Repaired],
    bad: InvalidToolCall,
) -> ToolCall | None:
    """An invalid call as a valid one, when its arguments can be repaired."""
    name = bad.get("name") or ""
    tool = tools.get(name)
    raw = bad.get("args")
    if tool is None or raw is None or not bad.get("id"):
        return None
    policy = pipeline.resolver.resolve(name).policy
    result = repair_call(
        raw, tool_schema(tool).facts, policy.args.aliases, unknown_args=policy.args.unknown
    )
    if result.args is None:
        return None
    if len(carried) > 1024:
        carried.clear()
    carried[bad["id"] or ""] = result
    return ToolCall(name=name, args=result.args, id=bad["id"], type="tool_call")
