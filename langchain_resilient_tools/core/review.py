"""What a person is asked about a write whose outcome is unknown, and what they answer.

With ``ToolPolicy(unknown_outcome="interrupt")`` the adapters raise a LangGraph
``interrupt()`` whose value is an `OutcomeReview` and whose ``response_schema`` is
`DECISION_SCHEMA`. The review speaks LangChain's approval conventions
(`HumanInTheLoopMiddleware(interrupt_mode="per_call")`'s ``ToolApprovalRequest``):
``type="tool_approval"``, ``tool_call_id``, ``name``, ``args`` and ``description``,
plus what only an unknown outcome has. So one approval UI serves both, and it may
answer with LangChain's decisions, each meaning what it means there:

- ``{"type": "approve"}``: run the call (once more, with the same idempotency key);
- ``{"type": "respond", "message": ...}``: the person answers for the tool (it took
  effect, and this is its result);
- ``{"type": "reject", "message": ...}``: do not run it (the outcome stays unknown).

An edit is not offered: a write sent again with other arguments is another call. Our
own form, a `HumanDecision` (``"run_again"``, ``"give_up"``, ``{"choice": "done",
"result": ...}``), is accepted as before. LangGraph checks a resume value against the
schema before it is saved, and refuses one that is neither (nothing is saved; the
interrupt can be answered again). The question travels on the call's answer
(`pipeline.review`) and is asked by the adapters (`adapters.review`); this module is the
data and its validation.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypedDict

from .call import Call
from .policy import ResolvedPolicy

Choice = Literal["run_again", "done", "give_up"]

CHOICES: dict[str, str] = {
    "run_again": "Run the call once more, with the same idempotency key.",
    "done": 'It took effect: answer the model with the result you give ("result").',
    "give_up": "Do not run it again: the model is told the outcome stays unknown.",
}
"""Each choice and what it does, as the person reads it in the review."""

NO_INTERRUPT = (
    'unknown_outcome="interrupt" works in ResilientToolNode and ResilientToolsMiddleware, '
    "which run each call of a step so that a resume runs none of them again; a wrapped tool "
    'cannot, so wrap it with unknown_outcome="answer" (the default) or use those adapters.'
)

RESUME_EXAMPLE = (
    'Command(resume={"type": "approve"}) | Command(resume={"type": "respond", "message": '
    '...}) | Command(resume={"type": "reject", "message": "..."}); or {"choice": "run_again"'
    ' | "done" (with "result") | "give_up"}'
)


class OutcomeReview(TypedDict):
    """The value of the ``interrupt()`` raised for a write whose outcome is unknown: a
    LangChain ``ToolApprovalRequest`` (its five keys), and more."""

    type: Literal["tool_approval"]
    """As LangChain's ``ToolApprovalRequest``: read it as an approval of one call."""
    name: str
    """The tool's name (as ``ToolApprovalRequest``; `tool` says the same)."""
    description: str
    """What the reviewer reads: what happened, and what each decision does."""
    kind: Literal["unknown_outcome"]
    tool: str
    tool_call_id: str
    args: dict[str, Any]
    """The arguments the write ran with."""
    idempotency_key: str
    """The key the write was sent with (a rerun sends the same one)."""
    what_happened: str
    """Why the outcome is unknown (the text the model would otherwise read)."""
    attempts: int
    failed_at: float
    """When the outcome became unknown (Unix time)."""
    seconds_ago: float
    """How long before this question that was."""
    choices: dict[str, str]
    resume_with: str
    problem: str | None
    """Why the previous answer was not understood, when this question is asked again."""


class ApproveDecision(TypedDict):
    """Run the write once more, with the same idempotency key (LangChain's approve)."""

    type: Literal["approve"]


class RespondDecision(TypedDict):
    """It took effect: `message` is its result, as the model should read it."""

    type: Literal["respond"]
    message: str


class RejectDecision(TypedDict):
    """Do not run it again: the model is told the outcome stays unknown (`message`: why)."""

    type: Literal["reject"]
    message: NotRequired[str]


class HumanDecision(BaseModel):
    """A person's answer to an `OutcomeReview`, given as ``Command(resume=...)``.

    ``choice``: ``"run_again"`` runs the write once more (same idempotency key) and the
    model gets that run's answer; ``"done"`` answers the model with `result`, marked as
    confirmed by a person; ``"give_up"`` tells the model the outcome stays unknown and a
    person chose not to retry (with `note`, if given).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    choice: Choice
    result: Any = None
    """For ``"done"``: the write's result, as the model should read it."""
    note: str | None = None
    """Optional words for the model (e.g. why the person gave up)."""


Choices = Literal["run_again", "done", "give_up"]

DECISION_SCHEMA: Any = Union[  # noqa: UP007 - a union LangGraph's TypeAdapter validates
    Annotated[
        Union[ApproveDecision, RespondDecision, RejectDecision],  # noqa: UP007
        Field(discriminator="type"),
    ],
    HumanDecision,
    Choices,
]
"""The ``response_schema`` of the review's ``interrupt()``: LangChain's approve,
respond and reject decisions, or a `HumanDecision` (or its choice as text)."""

_FROM_APPROVAL = {"approve": "run_again", "respond": "done", "reject": "give_up"}


def parse_decision(value: Any) -> HumanDecision | str:
    """The decision in a resume value, or why it is not one (for the next question)."""
    if isinstance(value, HumanDecision):  # as LangGraph validated it
        return _checked(value)
    if isinstance(value, dict) and value.get("type") in _FROM_APPROVAL:
        message = value.get("message")
        value = {"choice": _FROM_APPROVAL[value["type"]]} | (
            {} if message is None else {"result" if value["type"] == "respond" else "note": message}
        )
    if isinstance(value, str):
        value = {"choice": value}
    if not isinstance(value, dict):
        return f"expected a dict with 'choice' (or a choice as text), got {type(value).__name__}"
    try:
        decision = HumanDecision.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
        )
        return f"not a decision ({problems}); choices: {', '.join(CHOICES)}"
    return _checked(decision)


def _checked(decision: HumanDecision) -> HumanDecision | str:
    if decision.choice == "done" and decision.result is None:
        return "'done' needs the write's 'result' (what the model should be told)"
    return decision


def describe(question: Any) -> str:
    """What a reviewer reads (``ToolApprovalRequest.description``)."""
    return (
        f"{question['what_happened']} Approve to send it once more with the same "
        "idempotency key; respond with its result if it took effect; reject to leave "
        "the outcome unknown."
    )


def review_of(question: Mapping[str, Any], problem: str | None = None) -> dict[str, Any]:
    """The `OutcomeReview` that asks `question` (a call's, `pipeline.review.mark`) now;
    `problem`: why the previous answer to it was not understood."""
    return {
        **question,
        "description": describe(question),
        "seconds_ago": round(max(0.0, time.time() - question["failed_at"]), 1),
        "choices": dict(CHOICES),
        "resume_with": RESUME_EXAMPLE,
        "problem": problem,
    }


def asking(resolved: ResolvedPolicy) -> bool:
    """Whether an unknown outcome under `resolved` is a question for a person: a write
    (reads are retried instead) with ``unknown_outcome="interrupt"``."""
    return resolved.policy.unknown_outcome.action == "interrupt" and not resolved.idempotent


def asks_person(call: Call) -> bool:
    """Whether an unknown outcome of `call` is a question for a person."""
    return asking(call.resolved)
