"""The pipeline: the stage order, written once, and the sync/async drivers around it.

Every adapter (`ResilientTool`, `ResilientToolNode`, `ResilientToolsMiddleware`) turns
its input into a `Call`, hands it to `Pipeline.run`/`Pipeline.arun`, and renders the
`Outcome`. Stages run outermost first; the last one runs the tool.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from ..core.call import Call, CallRecord
from ..core.errors import ResilienceSignal, ToolErrorType, ToolRaised, is_for_author
from ..core.freshness import wrote
from ..core.ignored import warn_ignored
from ..core.policy import PolicyResolver, ResolvedPolicy
from ..observe import otel as _otel
from ..observe.observer import Observer
from ..observe.stats import CallEvent, StatsSnapshot
from ..observe.toolstream import open_stream
from ..runtime import deadline as _deadline
from ..runtime.executor import TimedRunner, default_runner
from ..state.choose import as_backend
from ..text import messages as m
from ..text.classify import Failure, classify, with_check
from ..text.reported import error_result
from .admit import AdmitStage
from .attempt import AttemptStage
from .breaker.stage import BreakerStage
from .cache import CacheStage
from .checks import ChecksStage
from .dedup.stage import DedupStage
from .drain import DrainStage
from .fallback import FallbackStage
from .hedge.stage import HedgeStage
from .journal import dangling as _dangling
from .journal.stage import JournalStage
from .limit.stage import LimitStage
from .lookups import Lookups
from .repair.stage import RepairStage
from .retry.stage import RetryStage
from .stage import AsyncNext, BeforeStage, Env, Next, Stage
from .step import Outcome, Step, StepHooks
from .validate.stage import ValidateStage
from .verify import VerifyStage

try:
    from langgraph.errors import is_invalid_resume
except ImportError:  # pragma: no cover - older langgraph

    def is_invalid_resume(error: BaseException) -> bool:
        return False


STAGES: tuple[type[Stage], ...] = (
    RepairStage,  # malformed JSON, argument names and certain types repaired, and reported
    AdmitStage,  # unknown tools and unparseable calls stop here
    ValidateStage,  # arguments checked against the tool's schema; every problem listed
    JournalStage,  # writes: intent before, receipt after; a resume answers from the receipt
    DedupStage,  # repeated identical calls: reuse, block (writes) or warn
    FallbackStage,  # service failures: stale result, then stub data, then the error
    CacheStage,  # idempotent results: TTL cache hits, and last good results for fallback
    VerifyStage,  # a write whose outcome is unknown: looked up, then run once more if not done
    RetryStage,  # idempotency-aware retry with backoff
    HedgeStage,  # hedged reads: a slow attempt gets another one beside it; first good wins
    BreakerStage,  # per-tool circuit breaker: every attempt counted, open = final
    ChecksStage,  # result checks: a useless success raises LowQualityResult
    LimitStage,  # client-side limits: a slot (max_concurrency) and a rate-limit token
    DrainStage,  # writes: none starts once the run is asked to drain (a server stopping)
    AttemptStage,  # one attempt with a deadline; runs the tool
)
"""The stage order, outermost first. This is the only place it is written."""


_REFUSED_BY = {
    ToolErrorType.INVALID_ARGUMENTS: "validation",
    ToolErrorType.MALFORMED_CALL: "admission",
    ToolErrorType.UNKNOWN_TOOL: "admission",
    ToolErrorType.DUPLICATE_CALL: "dedup",
    ToolErrorType.CIRCUIT_OPEN: "breaker",
    ToolErrorType.RATE_LIMITED: "rate_limit",
}
"""Who answered a failed call that never reached the tool, by its error type."""


def _hooks(stages: Sequence[Stage], name: str) -> tuple[Any, ...]:
    """The bound `name` hooks of the `stages` that override it, in their order."""
    base = getattr(Stage, name)
    return tuple(getattr(s, name) for s in stages if getattr(type(s), name) is not base)


def _refused_by(error: ToolErrorType | None) -> str:
    """The ``served_by`` of a failed call that never reached the tool."""
    return _REFUSED_BY.get(error, "pipeline") if error is not None else "pipeline"


def _passes_through(exc: BaseException) -> bool:
    """LangGraph control flow, resume errors no model can fix, and wiring bugs only the
    graph's author can fix (`for_author`) are never answered: they are raised."""
    return isinstance(exc, GraphBubbleUp) or is_invalid_resume(exc) or is_for_author(exc)


def _as_is(exc: Exception) -> bool:
    """Whether `exc` leaves the tool for the stages as it is (signals and control flow);
    any other exception is wrapped as `ToolRaised` (the tool's failure, not ours)."""
    return isinstance(exc, ResilienceSignal) or _passes_through(exc)


def _returned(value: Any, call: Call) -> Any:
    """The tool's answer; one that reports an error (e.g. MCP ``isError``, or a text
    that reads as an error report) fails the call.

    A policy with result checks leaves the text detection to the checks stage, after
    its own checks (`pipeline.checks.judge`): what the user configured wins.
    """
    reported = error_result(value, detect_text=call.resolved.detect_text)
    if reported is not None:
        raise ToolRaised(reported)
    return value


def _terminal(call: Call) -> Any:
    assert call.run is not None, "the adapter gives every call a sync runner"
    try:
        value = call.run(call)
    except Exception as exc:
        if _as_is(exc):
            raise
        # Named by no local of this frame, which both tracebacks hold: no cycle.
        raise ToolRaised(exc) from exc
    return _returned(value, call)


async def _aterminal(call: Call) -> Any:
    assert call.arun is not None, "the adapter gives every call an async runner"
    try:
        value = await call.arun(call)
    except Exception as exc:
        if _as_is(exc):
            raise
        # Named by no local of this frame, which both tracebacks hold: no cycle.
        raise ToolRaised(exc) from exc
    return _returned(value, call)


def _never_runs(call: Call) -> Any:
    raise AssertionError("a malformed call is answered before it could run")


def _only_before(stage: BeforeStage) -> bool:
    """Whether the stage does nothing but its `before` check (keeps BeforeStage's drivers)."""
    cls = type(stage)
    return cls.wrap is BeforeStage.wrap and cls.awrap is BeforeStage.awrap


def _before_links(
    befores: tuple[Callable[[Call], None], ...], chain: Next, achain: AsyncNext
) -> tuple[Next, AsyncNext]:
    """One link for consecutive `BeforeStage`s: their checks in order, then the rest.

    The async link is a plain function returning the rest's awaitable (one coroutine
    frame less per stage; a check that refuses the call raises before the await).
    """

    def link(call: Call) -> Any:
        for before in befores:
            before(call)
        return chain(call)

    def alink(call: Call) -> Awaitable[Any]:
        for before in befores:
            before(call)
        return achain(call)

    return link, alink


@dataclass(slots=True)
class _Plan:
    """What the pipeline keeps per resolved policy (one per tool name): the stages that
    apply, composed once, and the facts the drivers read on every call."""

    chain: Next
    achain: AsyncNext
    budget: float | None
    """The call's own deadline, in seconds from its start (`ToolPolicy.call_deadline_s`)."""


class Pipeline:
    """The stages of `STAGES`, bound to one adapter's policies and resources."""

    def __init__(
        self,
        resolver: PolicyResolver,
        *,
        runner: TimedRunner | None = None,
        stages: Sequence[type[Stage]] = STAGES,
        on_outcome: Callable[[Outcome], None] | None = None,
        store: Any = None,
    ) -> None:
        self.resolver = resolver
        # The process-wide pool, with this adapter's own abandoned-thread counts.
        runner = runner or default_runner().scoped()
        self.env = Env(runner=runner, sync_terminal=_terminal, resolve=resolver.resolve)
        self.env.backend = as_backend(store)
        """Shared state (`store=`: a `BaseStore` or `StateBackend`), or in-process."""
        self.stages = [cls(self.env) for cls in stages]
        self._journal = next(
            (s for s in self.stages if isinstance(s, JournalStage)), JournalStage(self.env)
        )  # it also settles calls a stopped run left unanswered (`settle_unanswered`)
        self.hooks = StepHooks(
            opens=_hooks(self.stages, "open_step"),
            marks=_hooks(self.stages, "mark_answer"),
            closes=_hooks(self.stages, "close_step"),
            reviews=_hooks(self.stages, "review_step"),
        )
        """The step hooks of the stages that take part in steps (`pipeline.step`)."""
        self.loose_step = Step((), self.new_call, self.hooks)
        """The step of calls made outside any step the adapter knows (a wrapped tool's,
        a middleware's call outside a turn): its calls are not marked, and its answers
        are marked and closed as any step's."""
        self._on_outcome = on_outcome
        self.observer = Observer()
        """Counts every finished call (`stats`) and exports it (OpenTelemetry, callbacks)."""
        self._plans: dict[ResolvedPolicy, _Plan] = {}
        self._said: set[str] = set()
        """The tools whose ignored options were said (`core.ignored`)."""
        self.lookups = Lookups()
        """The reads of the adapter's tools, as checks for its writes (`learn_tools`)."""

    def learn_tools(self, tools: Mapping[str, Any]) -> None:
        """Know an adapter's tools (name to tool): its reads become the checks an
        ``unknown_outcome`` names (`pipeline.lookups`; their schemas are read on the first
        check asked for)."""
        resolve = self.resolver.resolve
        self.lookups.learn(tools, lambda name, tool: resolve(name, tool).access == "read")

    def _failure(self, exc: BaseException, call: Call) -> Failure:
        """`exc` as the model is told it; where the answer advises a check, the check
        that fits (`pipeline.lookups`)."""
        failure = classify(exc, call)
        if failure.suggestion is m.UNKNOWN_OUTCOME_HINT and not call.malformed:
            declared = call.resolved.policy.unknown_outcome.check
            check = self.lookups.check_for(call.name, call.args, declared)
            if check is not None:
                failure = with_check(failure, call.name, check)
        return failure

    def check_ignored(self, tools: Mapping[str, Any]) -> None:
        """Warn once per tool about options set for it that cannot take effect (a retry
        or a hedge on a write, `core.ignored`): for an adapter that knows its tools (name
        to tool: their annotations classify them, as in a call) when it is built; the
        others are told at a tool's first call. Its reads become the checks of its writes
        (`learn_tools`)."""
        self.learn_tools(tools)
        for name, tool in tools.items():
            resolved = self.resolver.resolve(name, tool)
            warn_ignored(self._said, self.resolver, name, resolved, stacklevel=3)

    def _plan(self, resolved: ResolvedPolicy, name: str) -> _Plan:
        """The stages that apply to a resolved policy, composed once per resolved policy
        (one per tool name, and one for a write a person chose to run again)."""
        plan = self._plans.get(resolved)
        if plan is None:
            warn_ignored(self._said, self.resolver, name, resolved)  # its first call
            chain: Next = _terminal
            achain: AsyncNext = _aterminal
            befores: list[Callable[[Call], None]] = []
            for stage in reversed(self.stages):
                if not stage.applies(resolved):
                    continue
                if isinstance(stage, BeforeStage) and _only_before(stage):
                    befores.insert(0, stage.before)  # a run of them is one link
                    continue
                if befores:
                    chain, achain = _before_links(tuple(befores), chain, achain)
                    befores = []
                chain = partial(stage.wrap, call_next=chain)
                achain = partial(stage.awrap, call_next=achain)
            if befores:
                chain, achain = _before_links(tuple(befores), chain, achain)
            plan = self._plans[resolved] = _Plan(chain, achain, resolved.deadline_s)
        return plan

    def open_step(
        self,
        tool_calls: Sequence[Mapping[str, Any]],
        state: Any = None,
        config: Any = None,
        *,
        step_id: str | None = None,
        invalid_calls: Sequence[Mapping[str, Any]] = (),
        tools: Mapping[str, Any] | None = None,
    ) -> Step:
        """The step of one model message's `tool_calls` (see `pipeline.step`): its calls
        are made with `Step.call`, and run in the order `Step.order` asks for;
        `invalid_calls` (with the `tools` they name) are repaired where they can be."""
        order = (None,) * len(tool_calls)
        step = Step(tool_calls, self.new_call, self.hooks, step_id, state, config, order=order)
        if invalid_calls:
            step.invalid_calls, step.tools = invalid_calls, tools or {}
        for hook in self.hooks.opens:
            hook(step)
        return step

    def new_call(
        self,
        *,
        call_id: str,
        name: str,
        args: dict[str, Any],
        tool: BaseTool | None,
        valid_tools: Sequence[str] = (),
        rerun: bool = False,
        of_step: Step | None = None,
        **fields: Any,
    ) -> Call:
        """A `Call` for `name` with its resolved policy and a fresh record; `rerun`: a
        write whose outcome was unknown, run once more because a person chose so;
        `of_step`: the step the call is one of, whose stages mark it (`Step.call`)."""
        resolver = self.resolver
        resolved = resolver.for_rerun(name, tool) if rerun else resolver.resolve(name, tool)
        call = Call(
            id=call_id,
            name=name,
            args=args,
            tool=tool,
            resolved=resolved,
            record=CallRecord(
                tool=name,
                call_id=call_id,
                classified_as=resolved.access,
                classified_by=resolved.classified_by,
            ),
            valid_tools=tuple(valid_tools),
            **fields,
        )
        if rerun:
            call.record.notices.append(m.HUMAN_RERUN_NOTICE)
        plan = self._plans.get(resolved) or self._plan(resolved, name)
        _deadline.start(call, plan.budget)  # the call's own budget starts now
        if of_step is not None:  # one of a step's calls, marked by the stages (`Step.call`)
            for mark in of_step.marks:
                mark(call)
        return call

    def refuse_malformed(self, bad: Mapping[str, Any], tools: Mapping[str, Any]) -> Outcome:
        """The outcome of `bad`, a call the model could not format that repair could not
        read (one of ``AIMessage.invalid_tool_calls`` not in `Step.repaired`): refused by
        admission (``malformed_call``, or ``unknown_tool``) before anything runs."""
        name = bad.get("name") or ""
        call = self.new_call(
            call_id=bad.get("id") or "",
            name=name,
            args={},
            tool=tools.get(name),
            valid_tools=tuple(tools),
            raw_args=bad.get("args"),
            parse_error=bad.get("error") or "the arguments are not valid JSON",
            passthrough_unknown=True,
        )
        call.run = _never_runs
        outcome = self.run(call)
        assert outcome.failure is not None, "a malformed call is refused"
        return outcome

    def run(self, call: Call) -> Outcome:
        """Drive `call` through the stages (sync). Never raises but for control flow."""
        start = time.perf_counter()
        plan = self._plans.get(call.resolved) or self._plan(call.resolved, call.name)
        streamed = open_stream(call)  # one start and end on the run's `tools` stream
        traced = _otel.enter(call)  # the call's span, current while it runs (tracing on)
        try:
            outcome = Outcome(call, plan.chain(call))
        except Exception as exc:
            if _passes_through(exc):
                _otel.interrupted(call, exc)
                if streamed is not None:
                    streamed.stopped(exc)
                raise
            outcome = Outcome(call, failure=self._failure(exc, call))
        except BaseException as exc:
            _otel.interrupted(call, exc)
            if streamed is not None:
                streamed.stopped(exc)
            raise
        finally:
            if traced is not None:
                _otel.leave(traced)
        event = self._finish(outcome, start, plan)
        if streamed is not None:
            streamed.answered(call, outcome.value, outcome.failure)
        if event is not None:
            self.observer.dispatch(event)
        return outcome

    async def arun(self, call: Call, *, sync_callbacks: bool = False) -> Outcome:
        """Drive `call` through the stages (async). Never raises but for control flow.

        `sync_callbacks`: the call belongs to a sync run (a sync step driven on a
        private loop), so its callback event goes to the run's sync handlers.
        """
        start = time.perf_counter()
        plan = self._plans.get(call.resolved) or self._plan(call.resolved, call.name)
        streamed = open_stream(call)  # one start and end on the run's `tools` stream
        traced = _otel.enter(call)  # the call's span, current while it runs (tracing on)
        try:
            outcome = Outcome(call, await plan.achain(call))
        except Exception as exc:
            if _passes_through(exc):
                _otel.interrupted(call, exc)
                if streamed is not None:
                    streamed.stopped(exc)
                raise
            outcome = Outcome(call, failure=self._failure(exc, call))
        except BaseException as exc:
            _otel.interrupted(call, exc)
            if streamed is not None:
                streamed.stopped(exc)
            raise
        finally:
            if traced is not None:
                _otel.leave(traced)
        event = self._finish(outcome, start, plan)
        if streamed is not None:
            streamed.answered(call, outcome.value, outcome.failure)
        if event is not None:
            if sync_callbacks:
                self.observer.dispatch(event)
            else:
                sending = self.observer.adispatch(event)
                if sending is not None:
                    await sending
        try:
            return outcome
        finally:  # from Python 3.12 on, a failure's traceback holds this frame (through
            del outcome  # its coroutines' ``f_back``): it must not hold the failure too

    def settle_unanswered(
        self, call: Call, steps: Sequence[str] | None, since: float | None = None
    ) -> Outcome:
        """The answer to `call`, a tool call that a stopped run left unanswered (cancelled,
        its worker killed): from its write journal at one of `steps` of its thread
        (``"tools@7"``, `core.resume.step_of`; `None`: not known), made at wall time
        `since`. Nothing runs: a receipt answers, an intent is ``unknown_outcome``, a
        call that never started is ``not_run`` (`pipeline.journal.recover`)."""
        start = time.perf_counter()
        plan = self._plans.get(call.resolved) or self._plan(call.resolved, call.name)
        try:
            outcome = Outcome(call, self._journal.settle(call, steps, since))
        except ResilienceSignal as exc:
            outcome = Outcome(call, failure=self._failure(exc, call))
        if call.thread_id and not call.idempotent and call.record.served_by == "journal":
            wrote(call.thread_id)  # it ran, or may have: the thread's earlier reads are stale
        event = self._finish(outcome, start, plan)
        if event is not None:
            self.observer.dispatch(event)
        return outcome

    @staticmethod
    def dangles(messages: Sequence[Any]) -> bool:
        """Whether a model message of `messages` has calls that no later `ToolMessage`
        answers (a stopped run left them: `pipeline.journal.dangling`)."""
        return bool(_dangling.dangling(messages))

    def answer_dangling(
        self, messages: Sequence[Any], tools: Mapping[str, Any], *, config: Any = None,
        store: Any = None, tools_node: str = "tools", messages_key: str = "messages",
    ) -> list[tuple[int, list[Any]]]:  # fmt: skip
        """The index of each model message of `messages` whose calls a stopped run left
        unanswered, with their answers from the write journal (`settle_unanswered`, at the
        steps of the thread where `tools_node` may have run them, read off the checkpoints
        of `config`'s thread); nothing runs (`pipeline.journal.dangling`)."""
        answered, _thread = self.repair_dangling(  # no state: nothing for a thread to keep
            messages, tools, None, config=config, store=store, tools_node=tools_node,
            messages_key=messages_key,
        )  # fmt: skip
        return answered

    def repair_dangling(
        self, messages: Sequence[Any], tools: Mapping[str, Any], state: Any, *,
        config: Any = None, store: Any = None, tools_node: str = "tools",
        messages_key: str = "messages",
    ) -> tuple[list[tuple[int, list[Any]]], dict[str, Any]]:  # fmt: skip
        """`answer_dangling` for the graph state `state` that holds `messages`, and what
        the thread keeps of the answers (the stages' sections of ``tool_ledger``, as a
        step's end says: dedup's entries for the writes answered from their receipts,
        whose repeats are then repeats in any process)."""
        marked: list[Any] = []

        def seen(outcome: Outcome, answer: Any) -> None:
            if outcome.call.ledger:  # a mark for the step's end, on a copy
                marked.append(self.loose_step.answer(outcome, answer))

        answered = _dangling.answer_gaps(
            self.new_call, self.settle_unanswered, tools, messages, config=config,
            store=store, tools_node=tools_node, messages_key=messages_key, state=state,
            seen=seen,
        )  # fmt: skip
        return answered, self.loose_step.close(marked).thread if marked else {}

    def stats(self) -> StatsSnapshot:
        """Per-tool statistics of the calls this pipeline has finished."""
        return self.observer.stats.snapshot()

    def _finish(self, outcome: Outcome, start: float, plan: _Plan) -> CallEvent | None:
        call = outcome.call
        record = call.record
        record.duration_ms = (time.perf_counter() - start) * 1000
        failure = outcome.failure
        if failure is None:
            record.outcome = "success"
            known = True
        else:
            record.outcome = "error"
            record.error = failure.error
            if record.served_by == "tool" and record.attempts == 0:
                record.served_by = _refused_by(record.error)  # the tool never ran
            known = call.tool is not None or call.name in call.valid_tools
        if (
            call.thread_id
            and not call.idempotent
            and (record.attempts or record.served_by == "verify")
        ):
            wrote(call.thread_id)  # it ran, and may have taken effect: earlier reads are stale
        event = outcome.event = self.observer.observe(record, known_tool=known, span=call.span)
        call.span = None
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        return event
