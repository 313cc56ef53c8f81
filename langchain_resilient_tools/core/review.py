"""What a person is asked about a write whose outcome is unknown, and what they answer.

With ``ToolPolicy(unknown_outcome="interrupt")`` the adapters raise a LangGraph
``interrupt()`` whose value is an `OutcomeReview`; the graph is resumed with
``Command(resume=...)`` carrying a `HumanDecision` (or its plain form: ``"run_again"``,
``"give_up"``, ``{"choice": "done", "result": ...}``). The flow itself lives in
`adapters.review`; this module is the data and its validation.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, ValidationError

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
    'Command(resume={"choice": "run_again"}) | Command(resume={"choice": "done", '
    '"result": ...}) | Command(resume={"choice": "give_up", "note": "..."})'
)


class OutcomeReview(TypedDict):
    """The value of the ``interrupt()`` raised for a write whose outcome is unknown."""

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


def parse_decision(value: Any) -> HumanDecision | str:
    """The decision in a resume value, or why it is not one (for the next question)."""
    if isinstance(value, HumanDecision):
        return value
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
    if decision.choice == "done" and decision.result is None:
        return "'done' needs the write's 'result' (what the model should be told)"
    return decision


def asking(resolved: ResolvedPolicy) -> bool:
    """Whether an unknown outcome under `resolved` is a question for a person: a write
    (reads are retried instead) with ``unknown_outcome="interrupt"``."""
    return resolved.policy.unknown_outcome.action == "interrupt" and not resolved.idempotent


def asks_person(call: Call) -> bool:
    """Whether an unknown outcome of `call` is a question for a person."""
    return asking(call.resolved)
