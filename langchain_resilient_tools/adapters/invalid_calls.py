"""Calls the model could not format (``AIMessage.invalid_tool_calls``), under
`create_agent`: they never reach the tool node, so the middleware's ``after_model``
answers them here, with the pipeline's step of the message: one whose arguments repair
could read (`Step.repaired`) is moved into the message's ``tool_calls`` (same id) and
runs like any other, reporting its repairs; the others are refused by the pipeline
(`Pipeline.refuse_malformed`: ``malformed_call``), and the agent goes back to the model when no call is left to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool

from ..pipeline import Pipeline
from ..state.graph import ERRORS_KEY
from ..text.envelope import failure_message, take_error_record


def answer_invalid_calls(
    pipeline: Pipeline,
    tools: Mapping[str, BaseTool],
    state: Mapping[str, Any],
) -> dict[str, Any] | None:
    """The state update answering the last AIMessage's invalid calls, if it has any."""
    messages = state["messages"]
    # Another middleware's after_model may have answered calls first (a limit, a person).
    last = next((m for m in reversed(messages) if not isinstance(m, ToolMessage)), None)
    if not isinstance(last, AIMessage) or not last.invalid_tool_calls:
        return None
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    pending = [b for b in last.invalid_tool_calls if b.get("id") and b["id"] not in answered]
    step = pipeline.open_step((), state, invalid_calls=pending, tools=tools)
    replies: list[ToolMessage] = []
    moved: list[ToolCall] = []
    for bad in pending:
        fixed = step.repaired.get(bad["id"] or "")
        if fixed is not None:  # runs like any other call, answered under its own id
            name = bad.get("name") or ""
            moved.append(ToolCall(name=name, args=fixed, id=bad["id"], type="tool_call"))
            continue
        outcome = pipeline.refuse_malformed(bad, tools)
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
