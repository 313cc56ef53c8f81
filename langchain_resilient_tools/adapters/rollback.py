"""Graph-state bookkeeping of one tool step: ledger entries and rollbacks.

Stages cannot write graph state; they leave what should be written on the call
(`Call.ledger`) and the adapter's answer carries it, in the ToolMessage's
``response_metadata``, to the end of the step, where the graph adapters write it:

- `ResilientToolNode` (`finish_node_step`): ledger entries go to ``tool_ledger`` when
  the state has it. A rollback replaces the whole step's output: the AIMessage that
  made the calls is removed with `RemoveMessage` (so none of its calls is left
  unanswered and no ToolMessage is orphaned) and one guidance `HumanMessage` is added.
- `ResilientToolsMiddleware`: each call's `Command` writes its ledger entries; the
  rollback happens in ``before_model`` (`rollback_update`), which removes the
  AIMessage and every ToolMessage answering it.

- `ResilientTool` (a tool, not a graph node) cannot touch graph state: its dedup ledger
  is in memory only, and ``rollback`` degrades to the ``low_quality_result`` envelope.

Rollbacks are counted (``tool_ledger["rollbacks"]``, or in memory per thread when the
state has no ledger); past `ResultChecks.max_rollbacks` the low-quality
envelope stays as feedback. A step without low-quality results resets the count.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.types import Command

from ..core.errors import ToolErrorType
from ..pipeline import Outcome, answered_entries, pointing_like
from ..state.graph import LEDGER_KEY
from ..text import messages as m
from ..text.classify import Failure
from ..text.envelope import as_it_came
from ..text.redact import redact

LEDGER_META = "lrt_ledger"
"""``response_metadata`` key carrying a call's ledger entries to the end of the step."""
ROLLBACK_META = "lrt_rollback"
"""``response_metadata`` key of a low-quality answer whose policy asks for a rollback."""
GUIDANCE_ID_PREFIX = "lrt-rollback-"
_MARKS = frozenset({LEDGER_META, ROLLBACK_META, "tool_error"})
"""Metadata keys that give the end of a step something to do."""
T = TypeVar("T")


def wants_rollback(outcome: Outcome) -> bool:
    failure: Failure | None = outcome.failure
    return (
        failure is not None
        and failure.error is ToolErrorType.LOW_QUALITY_RESULT
        and outcome.call.resolved.policy.results.on_low_quality == "rollback"
    )


def guidance(outcome: Outcome) -> str:
    call = outcome.call
    args = redact(json.dumps(call.args, ensure_ascii=False, default=str), limit=160)
    reason = outcome.failure.message if outcome.failure else ""
    return m.ROLLBACK_GUIDANCE.format(tool=call.name, args=args, reason=reason)


def as_answered(outcome: Outcome) -> bool:
    """Whether the answer of `outcome` is the tool's own message as it came: a healthy
    call the layer did nothing visible to, with nothing to carry to the end of the step
    (`success_message` and `annotate` would hand it back unchanged)."""
    call = outcome.call
    return outcome.failure is None and call.ledger is None and as_it_came(outcome.value, call)


def annotate(answer: T, outcome: Outcome) -> T:
    """`answer` (a ToolMessage) carrying the call's ledger entries and rollback wish."""
    if not isinstance(answer, ToolMessage):
        return answer
    marks: dict[str, Any] = {}
    entries = outcome.call.ledger
    if entries:  # the entry of the call's own result points at `answer` (if it holds it)
        marks[LEDGER_META] = answered_entries(entries, answer, outcome.call)
    if wants_rollback(outcome):
        marks[ROLLBACK_META] = {
            "guidance": guidance(outcome),
            "max": outcome.call.resolved.policy.results.max_rollbacks,
        }
    if not marks:
        return answer
    # On a copy: a healthy answer is the tool's own message, which stays as it was.
    meta = {**answer.response_metadata, **marks}
    return cast(T, answer.model_copy(update={"response_metadata": meta}))


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


def pop_ledger(messages: Sequence[ToolMessage]) -> dict[str, Any]:
    """The ledger entries the messages carry (removed from their metadata)."""
    entries: dict[str, Any] = {}
    for msg in messages:
        for key, data in (msg.response_metadata.pop(LEDGER_META, None) or {}).items():
            old = entries.get(key)
            if old is None:
                entries[key] = data
                continue
            # The most repeats is the latest word on a key; it points at the message
            # holding the result when the other word on it does (twins of one step).
            newer, other = (
                (data, old) if data.get("repeats", 0) >= old.get("repeats", 0) else (old, data)
            )
            entries[key] = pointing_like(newer, other)
    return entries


def _ledger_of(state: Any) -> Mapping[str, Any] | None:
    if isinstance(state, Mapping) and isinstance(state.get(LEDGER_KEY), Mapping):
        ledger: Mapping[str, Any] = state[LEDGER_KEY]
        return ledger
    return None


def rollback_update(
    history: Sequence[AnyMessage], answers: Sequence[ToolMessage], count: int
) -> tuple[list[Any] | None, int]:
    """Messages that undo the turn `answers` answer, and the new rollback count.

    Returns ``(None, count)`` when nothing is rolled back: no answer asks for it, the
    count is at its bound (feedback stays), or the turn cannot be found.
    """
    marks: list[Mapping[str, Any]] = [
        mark for a in answers if isinstance(mark := a.response_metadata.get(ROLLBACK_META), Mapping)
    ]
    low = any(
        (a.response_metadata.get("tool_error") or {}).get("error")
        == ToolErrorType.LOW_QUALITY_RESULT.value
        for a in answers
    )
    if not marks:
        return None, 0 if not low else count
    bound = min(int(mark.get("max", 0)) for mark in marks)
    ids = {a.tool_call_id for a in answers}
    ai = next(
        (
            msg
            for msg in reversed(history)
            if isinstance(msg, AIMessage) and ids & {tc["id"] for tc in msg.tool_calls}
        ),
        None,
    )
    if count >= bound or ai is None or not ai.id:
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
    texts = list(dict.fromkeys(str(mark["guidance"]) for mark in marks))
    note = HumanMessage("\n".join(texts), id=GUIDANCE_ID_PREFIX + uuid.uuid4().hex[:12])
    return [*removed, note], count + 1


def finish_node_step(
    output: Any,
    input: Any,
    *,
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
    if not any(_MARKS.intersection(a.response_metadata) for a in answers):
        # Nothing to write and nothing to roll back: only a rollback count to reset.
        ledger = _ledger_of(state)
        if not memory.get(thread_id or "") and not (ledger and ledger.get("rollbacks")):
            return output
    entries = pop_ledger(answers)
    in_graph = state is input and isinstance(input, dict) and isinstance(output, dict)
    has_ledger = bool(ledger_key) and isinstance(state, dict) and ledger_key in state
    update: dict[str, Any] = {}
    if has_ledger and entries:
        update["dedup"] = entries
    if in_graph and not any(isinstance(v, Command) for v in output.values()):
        ledger = _ledger_of(input) if has_ledger and ledger_key == LEDGER_KEY else None
        scope = thread_id or ""
        count = int(ledger.get("rollbacks", 0) or 0) if ledger is not None else memory.get(scope, 0)
        history = input.get(messages_key, [])
        replacement, new_count = rollback_update(history, answers, count)
        for msg in answers:
            msg.response_metadata.pop(ROLLBACK_META, None)
        if replacement is not None:
            output = {**output, messages_key: replacement}
        if new_count != count:
            if has_ledger:
                update["rollbacks"] = new_count
            else:
                memory[scope] = new_count
    else:
        for msg in answers:
            msg.response_metadata.pop(ROLLBACK_META, None)
    if update and ledger_key:
        if isinstance(output, dict):
            output = {**output, ledger_key: update}
        else:
            output = [*output, {ledger_key: update}]
    return output
