"""A question for a person, as a step carries it (``unknown_outcome="interrupt"``).

A write whose outcome is unknown, under a policy that asks a person (`core.review`),
leaves its question on its answer (`mark`, the verify stage's ``mark_answer``): the
answer is what LangGraph keeps across the interrupt, so the question survives where the
step's objects do not. At the step's review (`Step.review`) the questions are read off
the answers, as they are (`questions`: each may be the very object LangGraph is saving
as a task's result), and the adapter asks each one through ``interrupt()``. The answer a
decision makes (`decided`) is a new message, without the question.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage

from ..core.call import Call
from ..core.errors import ToolErrorType
from ..core.idempotency import key_for
from ..core.review import HumanDecision, asks_person
from ..text.classify import Failure
from ..text.envelope import confirmed_by_person, given_up_by_person

QUESTION_META = "lrt_question"
"""``response_metadata`` key of the question an answer carries to the step's review."""


def mark(call: Call, failure: Failure | None) -> Mapping[str, Any] | None:
    """The question for a person that the answer of `call` carries, when it asks one."""
    if failure is None or failure.error is not ToolErrorType.UNKNOWN_OUTCOME:
        return None
    if not asks_person(call):
        return None
    question = {
        "type": "tool_approval",
        "name": call.name,
        "kind": "unknown_outcome",
        "tool": call.name,
        "tool_call_id": call.id,
        "args": dict(call.args),
        "idempotency_key": key_for(call),
        "what_happened": failure.message,
        "attempts": call.record.attempts,
        "failed_at": time.time(),
    }
    return {QUESTION_META: question}


def questions(messages: Sequence[ToolMessage]) -> dict[str, dict[str, Any]]:
    """The questions `messages` carry, by the id of the call each answers (read, never
    taken off: a decision's answer replaces the message, `decided`)."""
    found = {}
    for message in messages:
        question = message.response_metadata.get(QUESTION_META)
        if isinstance(question, dict):
            found[message.tool_call_id] = question
    return found


def decided(message: ToolMessage, decision: HumanDecision) -> ToolMessage | None:
    """The answer a person's `decision` makes of `message` (a call's answer carrying a
    question): ``done``, the result they gave; ``give_up``, the ``unknown_outcome``
    envelope saying so; `None` for ``run_again`` (the write's next run answers)."""
    if decision.choice == "run_again":
        return None
    meta = {k: v for k, v in message.response_metadata.items() if k != QUESTION_META}
    asked = message.model_copy(update={"response_metadata": meta})
    if decision.choice == "done":
        return confirmed_by_person(asked, decision.result)
    return given_up_by_person(asked, decision.note)
