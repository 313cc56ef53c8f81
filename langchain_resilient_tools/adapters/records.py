"""The error records of one `ResilientToolNode` step, written to the graph state's
``tool_errors`` when the state has that key.

The state is the node's input, or, when a step runs one call sent to the node with
`Send` (``create_react_agent(version="v2")``: a ``ToolCallWithContext`` payload;
``create_agent``: a list of tool calls), the state that payload carries or LangGraph
reads for it (`ToolNode._extract_state`): the keys of the graph's state schema decide,
never those of the payload.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from langchain_core.messages import ToolMessage

from ..text.envelope import take_error_record


def state_keys(state: Any) -> Collection[str] | None:
    """The keys of a graph state (a dict, or a pydantic or dataclass state schema), or
    `None` when `state` is not one (a list of messages)."""
    if isinstance(state, Mapping):
        return state.keys()
    fields = getattr(type(state), "model_fields", None) or getattr(
        state, "__dataclass_fields__", None
    )
    return fields.keys() if isinstance(fields, Mapping) else None


def with_error_records(
    output: Any,
    state: Any,
    *,
    key: str | None,
    messages_key: str,
    dropped: Callable[[str], None],
) -> Any:
    """`output` (a node step's) with its error records under `key` when the graph
    `state` has that key; `dropped(key)` is told when it has not (the records are lost).
    Private records are taken off the answers either way (`take_error_record`)."""
    messages: list[Any] = []
    if isinstance(output, dict):
        messages = output.get(messages_key, [])
    else:
        for item in output:
            if isinstance(item, dict):
                messages.extend(item.get(messages_key, []))
            elif isinstance(item, ToolMessage):
                messages.append(item)
    records = [r for msg in messages if (r := take_error_record(msg)) is not None]
    keys = state_keys(state) if records and key else None
    if keys is None or not key:
        return output
    if key not in keys:  # e.g. create_react_agent's default AgentState
        dropped(key)
        return output
    if isinstance(output, dict):
        return {**output, key: records}
    return [*output, {key: records}]
