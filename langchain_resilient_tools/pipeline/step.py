"""The step: all the tool calls of one model message, as the pipeline runs them.

An adapter that sees a message's calls opens a step (`Pipeline.open_step`), makes each
call of it with `Step.call` (not `Pipeline.new_call`), runs the calls as its framework
runs them, in the order `Step.order` asks for, renders the outcomes, marks each answer
(`Step.answer`), asks a person what the answers ask (`Step.review`, when a write may)
and writes what the step's end says (`Step.close`). A stage may take part in the step
with four optional hooks (`pipeline.stage.Stage`):

- ``open_step(step)``: once, before any call is made: look at the step's calls, state and
  config, mark each call the step makes (`Step.on_call`), and say which call waits for
  which (`Step.order`). Dedup does: identical calls are one logical call, the first runs
  first and its twins share its outcome (`pipeline.dedup.twins`).
  Repair does too: a call the model could not format (``AIMessage.invalid_tool_calls``,
  `Step.invalid_calls`) whose text it can repair becomes an ordinary call
  (`Step.repaired`), and the call that runs later under its id reports the repairs.
- ``mark_answer(outcome, message)``: what a call's answer carries to the end of its step
  (`Step.answer`), in its ``response_metadata``: a mark travels with the message, so it
  survives where the step's objects do not (a reviewed call's answer, kept by LangGraph
  across an interrupt; the middleware's answers, read back in a later node). Dedup marks
  the ledger entries a call left, checks a wish to roll the step back, verify a question
  for a person.
- ``review_step(step, messages, update)``: once the step's calls have answered, before
  its end, read what the answers ask a person into `StepUpdate.questions` (`Step.review`):
  verify's questions about writes whose outcome is unknown (``unknown_outcome=
  "interrupt"``, `pipeline.review`). Nothing is taken off: an answer may be the very
  object LangGraph is saving as a task's result. The adapter asks each question (an
  ``interrupt()``) and answers the call as the decision says (`Step.decided`: a new
  message, without the question).
- ``close_step(step, messages, update, keep)``: at the end of the step, turn the marks
  of its answers into the `StepUpdate` the adapter writes (`Step.close`): dedup's ledger
  entries for the graph state, checks' rollback. Marks are taken off the messages, but
  for ``keep``: then they stay (the middleware rolls back in ``before_model``).

State kept per thread has one place: the graph state's ``tool_ledger``, one section per
stage, read with `Step.thread_state` and written through `StepUpdate.thread` (the
adapters write it as it is; `docs/contributing.md` works an example through).

A stage stays no part of a step it has no hook for. Stages cannot write graph state:
the update says what to write, and each adapter writes it in its own framework's shapes.

The step is the pipeline's, never a stage's: what a stage learns of it stays in what it
registers here, so adapters translate their framework's shapes and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage

from ..core.call import Call
from ..core.review import HumanDecision
from ..observe.stats import CallEvent
from ..state.graph import LEDGER_KEY
from ..text.classify import Failure
from ..text.envelope import as_it_came
from . import review as _review

OnCall = Callable[[Call], None]
"""A stage's mark on each call a step makes (registered in its ``open_step``)."""


@dataclass(slots=True)
class Outcome:
    """A finished call: either `value` (what answered it) or `failure`."""

    call: Call
    value: Any = None
    failure: Failure | None = None
    event: CallEvent | None = None
    """What the call left in the pipeline's statistics (set when it finished)."""

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True, slots=True)
class Rollback:
    """The step's answers ask for it to be undone (``on_low_quality="rollback"``)."""

    guidance: tuple[str, ...]
    """What the model is told instead of the step (one text per distinct wish)."""
    bound: int
    """The fewest rollbacks in a row any of them allows (`ResultChecks.max_rollbacks`)."""


@dataclass(slots=True)
class StepUpdate:
    """What the end of a step writes, as the adapter's framework writes it."""

    thread: dict[str, Any] = field(default_factory=dict)
    """State kept per thread, to write: sections of the graph state's ``tool_ledger``
    (see `thread_state`), e.g. dedup's entries under ``"dedup"``, by key."""
    rollback: Rollback | None = None
    """A wish to undo the step, or `None`."""
    low_quality: bool = False
    """Some answer is a ``low_quality_result`` (a step without one resets the count of
    rollbacks in a row)."""
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Questions for a person, by the id of the call each is about (`Step.review`): the
    adapter asks them in the order of the calls (`core.review.OutcomeReview`)."""


MarkAnswer = Callable[[Outcome, ToolMessage], "Mapping[str, Any] | None"]
CloseStep = Callable[["Step", Sequence[ToolMessage], StepUpdate, bool], None]
ReviewStep = Callable[["Step", Sequence[ToolMessage], StepUpdate], None]


@dataclass(frozen=True, slots=True)
class StepHooks:
    """The stages' step hooks, in the stages' order (one set per pipeline)."""

    opens: tuple[Callable[[Step], None], ...] = ()
    marks: tuple[MarkAnswer, ...] = ()
    closes: tuple[CloseStep, ...] = ()
    reviews: tuple[ReviewStep, ...] = ()


@dataclass(slots=True, eq=False)
class Step:
    """The calls of one model message, made and run together (see the module)."""

    tool_calls: Sequence[Mapping[str, Any]]
    """The message's tool calls, in its order, as the adapter parsed them."""
    new_call: Callable[..., Call]
    """How a call is made (`Pipeline.new_call`), before the stages mark it."""
    hooks: StepHooks = StepHooks()
    """The pipeline's stages' hooks."""
    id: str | None = None
    """The step's identity when the adapter has one (a model message's), else `None`: a
    stage that needs one makes its own (one run of a node's step)."""
    state: Any = None
    """The graph state the step runs in, when there is one."""
    config: Any = None
    """The run's config (`RunnableConfig`), when there is one."""
    invalid_calls: Sequence[Mapping[str, Any]] = ()
    """The message's calls the model could not format, for an adapter that answers them
    apart from its calls (the middleware's ``after_model``)."""
    tools: Mapping[str, Any] = field(default_factory=dict)
    """The adapter's tools by name, when the step needs them (`invalid_calls`)."""
    repaired: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The arguments of the `invalid_calls` repair could read, by call id (``open_step``):
    the adapter runs them as calls of the message; the others it answers as malformed."""
    order: tuple[int | None, ...] = ()
    """For each call, the index of an earlier call it waits for (`Pipeline.open_step`:
    none waits, unless an ``open_step`` hook says so)."""
    marks: list[OnCall] = field(default_factory=list)
    """What the stages mark each call with (`on_call`), in the stages' order."""

    def thread_state(self, section: str) -> Mapping[str, Any]:
        """What the thread keeps under `section` (one stage's: its name, e.g. ``"dedup"``)
        in the graph state's ``tool_ledger``, the one place of state kept per thread; a
        stage writes it back through `StepUpdate.thread` (merged by
        `state.graph.merge_ledger`: a mapping key by key, anything else replaced).
        Empty without a graph state that keeps a ledger."""
        ledger = self.state.get(LEDGER_KEY) if isinstance(self.state, Mapping) else None
        kept = ledger.get(section) if isinstance(ledger, Mapping) else None
        return kept if isinstance(kept, Mapping) else {}

    def on_call(self, mark: OnCall) -> None:
        """Mark every call this step makes with `mark` (for a stage's ``open_step``)."""
        self.marks.append(mark)

    def call(self, **fields: Any) -> Call:
        """One call of this step: `Pipeline.new_call` with `fields`, marked by the
        stages that take part in the step (an adapter on its hot path may call
        ``new_call(of_step=step, ...)`` itself: the same, without passing `fields` on)."""
        return self.new_call(of_step=self, **fields)

    @staticmethod
    def as_answered(outcome: Outcome) -> bool:
        """Whether the answer of `outcome` is the tool's own message as it came: a
        healthy call the layer did nothing visible to, with nothing to carry to the end
        of the step (`answer` would hand it back unchanged)."""
        call = outcome.call
        return outcome.failure is None and call.ledger is None and as_it_came(outcome.value, call)

    def answer(self, outcome: Outcome, message: Any) -> Any:
        """`message` (the call's answer) carrying what the end of the step needs from it
        (the stages' ``mark_answer``), on a copy; anything but a `ToolMessage` as it is."""
        if not isinstance(message, ToolMessage):
            return message
        marks: dict[str, Any] = {}
        for mark in self.hooks.marks:
            marks.update(mark(outcome, message) or {})
        if not marks:
            return message
        # On a copy: a healthy answer is the tool's own message, which stays as it was.
        meta = {**message.response_metadata, **marks}
        return message.model_copy(update={"response_metadata": meta})

    def review(self, messages: Sequence[Any]) -> StepUpdate:
        """What the step's answers (`messages`: its ToolMessages; anything else is
        skipped) ask a person (`StepUpdate.questions`), read off them as they are."""
        answers = [msg for msg in messages if isinstance(msg, ToolMessage)]
        update = StepUpdate()
        for review in self.hooks.reviews:
            review(self, answers, update)
        return update

    @staticmethod
    def decided(message: ToolMessage, decision: HumanDecision) -> ToolMessage | None:
        """The answer a person's `decision` makes of `message`, an answer whose question
        `review` found (`None`: run the call once more, its run answers)."""
        return _review.decided(message, decision)

    def close(self, messages: Sequence[Any], *, keep: bool = False) -> StepUpdate:
        """The step's update, from the marks of its answers (`messages`: its
        ToolMessages; anything else is skipped); `keep`: leave the marks on them."""
        answers = [msg for msg in messages if isinstance(msg, ToolMessage)]
        update = StepUpdate()
        for close in self.hooks.closes:
            close(self, answers, update, keep)
        return update
