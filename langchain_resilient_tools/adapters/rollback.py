"""Graph-state bookkeeping of one tool step: ledger entries and rollbacks.

Stages cannot write graph state: what a step's end should write is in the pipeline's
`StepUpdate` (`Step.close`, from what each answer carried: see `pipeline.step`), and
the graph adapters write it in LangGraph's shapes:

- `ResilientToolNode` (`finish_node_step`): ledger entries go to ``tool_ledger`` when
  the state has it. A rollback replaces the whole step's output: the AIMessage that
  made the calls is removed with `RemoveMessage` (so none of its calls is left
  unanswered and no ToolMessage is orphaned) and one guidance `HumanMessage` is added.
- `ResilientToolsMiddleware`: each call's `Command` writes its ledger entries; the
  rollback happens in ``before_model`` (`rollback_before_model`, `rollback_update`),
  which removes the AIMessage and every ToolMessage answering it.

- `ResilientTool` (a tool, not a graph node) cannot touch graph state: its dedup ledger
  is in memory only, and ``rollback`` degrades to the ``low_quality_result`` envelope.

Rollbacks are counted (``tool_ledger["rollbacks"]``, or in memory per thread when the
state has no ledger); past `ResultChecks.max_rollbacks` the low-quality
envelope stays as feedback. A step without low-quality results resets the count.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.types import Command

from ..pipeline import Pipeline, Step, StepUpdate
from ..state.graph import LEDGER_KEY

GUIDANCE_ID_PREFIX = "lrt-rollback-"


def _tool_messages(output: Any, messages_key: str) -> list[ToolMessage]:
    items: list[Any] = []
    if isinstance(output, dict):
        items = list(output.get(messages_key, []))
    elif isinstance(output, list):
        for item in output:
            if isinstance(item, dict):
                items.extend(item.get(messages_key, []))
            else:
                items.append(item)
    return [msg for msg in items if isinstance(msg, ToolMessage)]


def _ledger_of(state: Any) -> Mapping[str, Any] | None:
    if isinstance(state, Mapping) and isinstance(state.get(LEDGER_KEY), Mapping):
        ledger: Mapping[str, Any] = state[LEDGER_KEY]
        return ledger
    return None


def rollback_update(
    history: Sequence[AnyMessage], answers: Sequence[ToolMessage], update: StepUpdate, count: int
) -> tuple[list[Any] | None, int]:
    """Messages that undo the turn `answers` answer, as the step's `update` asks, and
    the new rollback count.

    Returns ``(None, count)`` when nothing is rolled back: no answer asks for it, the
    count is at its bound (feedback stays), or the turn cannot be found.
    """
    rollback = update.rollback
    if rollback is None:
        return None, 0 if not update.low_quality else count
    ids = {a.tool_call_id for a in answers}
    ai = next(
        (
            msg
            for msg in reversed(history)
            if isinstance(msg, AIMessage) and ids & {tc["id"] for tc in msg.tool_calls}
        ),
        None,
    )
    if count >= rollback.bound or ai is None or not ai.id:
        return None, count
    call_ids = {tc["id"] for tc in ai.tool_calls} | {
        tc.get("id") for tc in ai.invalid_tool_calls if tc.get("id")
    }
    removed = [RemoveMessage(id=ai.id)]
    removed += [
        RemoveMessage(id=msg.id)
        for msg in history
        if isinstance(msg, ToolMessage) and msg.tool_call_id in call_ids and msg.id
    ]
    note = HumanMessage("\n".join(rollback.guidance), id=GUIDANCE_ID_PREFIX + uuid.uuid4().hex[:12])
    return [*removed, note], count + 1


def rollback_before_model(pipeline: Pipeline, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """`ResilientToolsMiddleware.before_model`: the update that rolls back the last tool
    turn when a result asked for it (`None`: nothing to do)."""
    messages = state["messages"]
    if not messages or not isinstance(messages[-1], ToolMessage):
        return None
    start = max((i for i, msg in enumerate(messages) if isinstance(msg, AIMessage)), default=-1)
    answers = [msg for msg in messages[start + 1 :] if isinstance(msg, ToolMessage)]
    ledger: Any = state.get(LEDGER_KEY) or {}
    count = int(ledger.get("rollbacks", 0) or 0)
    step_update = pipeline.loose_step.close(answers, keep=True)
    replacement, new_count = rollback_update(messages, answers, step_update, count)
    update: dict[str, Any] = {}
    if replacement is not None:
        update["messages"] = replacement
    if new_count != count:
        update[LEDGER_KEY] = {"rollbacks": new_count}
    return update or None


def finish_node_step(
    output: Any,
    input: Any,
    *,
    step: Step,
    state: Any = None,
    messages_key: str,
    ledger_key: str | None,
    memory: MutableMapping[str, int],
    thread_id: str | None,
) -> Any:
    """`ResilientToolNode`'s step output with ledger entries written and rollback done.

    `state`: the graph state when `input` is not it (a `Send` payload carrying one call
    of a step and the state: ledger entries are written, but no rollback, which undoes
    the whole step and is left to a node that runs it whole)."""
    state = input if state is None else state
    answers = _tool_messages(output, messages_key)
    step_update = step.close(answers)
    thread = step_update.thread  # the stages' sections of ``tool_ledger``
    if not thread and step_update.rollback is None and not step_update.low_quality:
        # Nothing to write and nothing to roll back: only a rollback count to reset.
        ledger = _ledger_of(state)
        if not memory.get(thread_id or "") and not (ledger and ledger.get("rollbacks")):
            return output
    in_graph = state is input and isinstance(input, dict) and isinstance(output, dict)
    has_ledger = bool(ledger_key) and isinstance(state, dict) and ledger_key in state
    update: dict[str, Any] = {}
    if has_ledger and thread:
        update.update(thread)
    if in_graph and not any(isinstance(v, Command) for v in output.values()):
        ledger = _ledger_of(input) if has_ledger and ledger_key == LEDGER_KEY else None
        scope = thread_id or ""
        count = int(ledger.get("rollbacks", 0) or 0) if ledger is not None else memory.get(scope, 0)
        history = input.get(messages_key, [])
        replacement, new_count = rollback_update(history, answers, step_update, count)
        if replacement is not None:
            output = {**output, messages_key: replacement}
        if new_count != count:
            if has_ledger:
                update["rollbacks"] = new_count
            else:
                memory[scope] = new_count
    if update and ledger_key:
        if isinstance(output, dict):
            output = {**output, ledger_key: update}
        else:
            output = [*output, {ledger_key: update}]
    return output
