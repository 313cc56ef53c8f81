"""Asking a person about a write whose outcome is unknown (``unknown_outcome="interrupt"``).

LangGraph resumes an interrupted node by running it again from the start, so nothing
that has an effect may run before the ``interrupt()`` on the second pass. Each call
that may need a person therefore runs as a LangGraph task (`langgraph.func.task`):
its answer is saved with the checkpoint when it finishes, and on resume the task
returns that answer without running the tool again. The same holds for a sibling call
of the step, and for a write run once more because the person chose so. Then, in the
order of the calls, each question the answers carry (`Step.review`: the pipeline marks
them, `pipeline.review`) becomes an ``interrupt()`` whose value is an `OutcomeReview`
(LangChain's ``ToolApprovalRequest`` and more) and whose ``response_schema`` is
`core.review.DECISION_SCHEMA`; the resume value is a decision, which makes the call's
answer (`review_each`, `Step.decided`):

- ``run_again`` (``approve``): the write runs once more, with the same idempotency key
  (as a task, so a later resume does not run it a third time); its answer is the answer;
- ``done`` (``respond``): the result the person gave, marked as confirmed by a person;
- ``give_up`` (``reject``): the ``unknown_outcome`` envelope, saying a person chose not
  to retry.

An answer the resume value does not make sense of is asked again, with the problem.
Tasks are told apart by the order they are started in, so the adapters start them in
a fixed order: `ResilientToolNode` from its own thread, in the order of the calls;
the middleware has one call per task (``create_agent`` sends each call on its own).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import cache
from typing import Any, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, interrupt

from ..core.errors import UsageError
from ..core.review import DECISION_SCHEMA, HumanDecision, parse_decision, review_of
from ..pipeline import Step
from ..state.graph import ERRORS_KEY
from ..text.envelope import take_error_record
from .context import RERUN

_CHECKPOINTER = "__pregel_checkpointer"
_CALL = "__pregel_call"


def require_checkpointer(config: RunnableConfig | None, adapter: str) -> None:
    """Raise `UsageError` unless this runs in a graph with a checkpointer: without one
    an interrupted call could never be resumed."""
    conf: Mapping[str, Any] = (config or {}).get("configurable") or {}
    if _CALL not in conf:
        raise UsageError(
            f'{adapter}: on_unknown_outcome="interrupt" asks a person through a LangGraph '
            "interrupt, which needs a compiled graph with a checkpointer; this call runs "
            'outside a graph. Use on_unknown_outcome="answer" here.'
        )
    if conf.get(_CHECKPOINTER) is None:
        raise UsageError(
            f'{adapter}: on_unknown_outcome="interrupt" needs a checkpointer to resume '
            "the graph after the person answers: compile it with one, e.g. "
            "graph.compile(checkpointer=InMemorySaver()) (or create_agent(..., "
            'checkpointer=...)), or use on_unknown_outcome="answer".'
        )


# -- asking, and the answer a decision makes -----------------------------------------


def _message_in(answer: Any) -> ToolMessage | None:
    if isinstance(answer, ToolMessage):
        return answer
    if isinstance(answer, Command) and isinstance(answer.update, dict):
        found = [m for m in answer.update.get("messages", ()) if isinstance(m, ToolMessage)]
        return found[0] if len(found) == 1 else None
    return None


def _asked(step: Step, answers: list[Any]) -> list[tuple[int, ToolMessage, dict[str, Any]]]:
    """The answers that carry a question (`Step.review`), in order: index, message, question."""
    messages = [_message_in(answer) for answer in answers]
    questions = step.review([msg for msg in messages if msg is not None]).questions
    return [
        (i, msg, question)
        for i, msg in enumerate(messages)
        if msg is not None and (question := questions.get(msg.tool_call_id)) is not None
    ]


def decide(question: Mapping[str, Any]) -> HumanDecision:
    """The person's decision: an ``interrupt()`` until a resume value is one."""
    problem: str | None = None
    while True:
        got = parse_decision(
            interrupt(review_of(question, problem), response_schema=DECISION_SCHEMA)
        )
        if isinstance(got, HumanDecision):
            return got
        problem = got


def _replaced(answer: Any, message: ToolMessage) -> Any:
    if isinstance(answer, ToolMessage):
        return message
    update = dict(answer.update)
    update["messages"] = [message]
    record = take_error_record(message)
    if record is None:
        update.pop(ERRORS_KEY, None)
    elif ERRORS_KEY in update:
        update[ERRORS_KEY] = [record]
    return Command(update=update)


# -- durable runs: LangGraph tasks, whose answers survive the interrupt ---------------


def _job(job: Callable[[], Any]) -> Any:
    return job()


async def _ajob(job: Callable[[], Awaitable[Any]]) -> Any:
    return await job()


@cache
def _tasks() -> tuple[Any, Any]:
    from langgraph.func import task  # only when a person may be asked

    named = cast(Any, task)(name="resilient_tool_call")
    return named(_job), named(_ajob)


def start(job: Callable[[], Any]) -> Any:
    """Start `job` as a task of the running node (a future: ``.result()``); a job that
    finished before, in an earlier pass of the node, is not run again."""
    return _tasks()[0](job)


def run_durably(job: Callable[[], Any]) -> Any:
    return start(job).result()


def astart(job: Callable[[], Awaitable[Any]]) -> Any:
    """`start` for a coroutine function (an awaitable)."""
    return _tasks()[1](job)


async def arun_durably(job: Callable[[], Awaitable[Any]]) -> Any:
    return await astart(job)


def rerun(job: Callable[[], Any]) -> Callable[[], Any]:
    """`job` with `RERUN` set while it runs."""

    def again() -> Any:
        token = RERUN.set(True)
        try:
            return job()
        finally:
            RERUN.reset(token)

    return again


def arerun(job: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    async def again() -> Any:
        token = RERUN.set(True)
        try:
            return await job()
        finally:
            RERUN.reset(token)

    return again


def review_each(
    step: Step, answers: list[Any], again: Callable[[int], Callable[[], Any]]
) -> list[Any]:
    """`answers` (of `step`'s calls) with every question asked, in order; `again(i)`: the
    job that runs call `i` once more."""
    out = list(answers)
    for i, message, question in _asked(step, out):
        settled = step.decided(message, decide(question))
        out[i] = run_durably(rerun(again(i))) if settled is None else _replaced(out[i], settled)
    return out


async def areview_each(
    step: Step, answers: list[Any], again: Callable[[int], Callable[[], Awaitable[Any]]]
) -> list[Any]:
    out = list(answers)
    for i, message, question in _asked(step, out):
        settled = step.decided(message, decide(question))
        if settled is None:
            out[i] = await arun_durably(arerun(again(i)))
        else:
            out[i] = _replaced(out[i], settled)
    return out
