"""Verify ambiguous writes: look the outcome up instead of guessing.

A write (a non-idempotent tool) that timed out or lost its connection after its request
was sent may or may not have taken effect: `text.classify` calls that
``unknown_outcome``. With ``UnknownOutcome(verify=fn)`` this stage, just outside retry, asks
`fn` first (`VerifyInfo`: tool, arguments, idempotency key):

- the write happened: the call is answered with the result `fn` found, marked verified;
- it did not: the call runs once more (the same idempotency key), after the wait a retry
  would make (`rerun_wait`: the retry policy's first backoff, within the deadline), and
  that run's outcome is the answer, saying it was sent once more (ambiguous again:
  ``unknown_outcome`` that says it ran twice, `RerunUnconfirmed`; a write never runs a
  third time).
  Not after a timeout, though: the timed-out attempt may still be running (Python cannot
  stop its thread), and a write still on its way is not one that did not happen, so
  the answer stays ``unknown_outcome``;
- `fn` raised or did not answer within ``verify_timeout``: ``unknown_outcome``, as
  without `verify`.

The same lookup settles a write whose earlier run the journal could not settle
(`pipeline.journal`): orphaned (its worker died before its receipt), or unknown because
the journal's store could not be read. The journal marks the call (`Call.unsettled`), and
this stage looks it up *before* anything runs, with the same three answers.

`lookup_outcome` is the pure decision on what `fn` said; the drivers do the I/O.

What no lookup settles, a person may: with ``unknown_outcome="interrupt"`` the answer
carries a question to the end of its step (`mark_answer`, `review_step`: `pipeline.review`),
which the graph adapters ask through LangGraph's ``interrupt()`` (`adapters.review`).
"""

from __future__ import annotations

import enum
import inspect
import logging
import random
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage

from ..core import testing as _testing
from ..core.call import Call
from ..core.errors import (
    AttemptTimeout,
    JournalUnreadable,
    OrphanedWrite,
    OutcomeStillUnknown,
    RerunUnconfirmed,
    ToolRaised,
)
from ..core.idempotency import key_for
from ..core.policy import ResolvedPolicy, VerifyInfo
from ..runtime import deadline as _deadline
from ..runtime.executor import await_with_timeout
from ..runtime.loop import run_sync
from ..text import messages as m
from ..text.classify import is_unknown_outcome
from . import review
from .stage import AsyncNext, Next, Stage
from .step import Outcome, Step, StepUpdate

log = logging.getLogger(__name__)


class Lookup(enum.Enum):
    """What the lookup said, when it did not find the write's result."""

    NOT_DONE = "not_done"
    UNKNOWN = "unknown"


def lookup_outcome(found: Any) -> Any:
    """What `verify` returned: `None` (the write did not happen) or its result."""
    return Lookup.NOT_DONE if found is None else found


def may_run_again(first: Exception) -> bool:
    """Whether a write that was not found may run again: not while the attempt that
    failed may still be running (it timed out after it started)."""
    return not (isinstance(first, AttemptTimeout) and first.started)


def settle(found: Any, first: Exception) -> str:
    """What to do with what the lookup said: ``"raise"`` the first failure (the outcome
    stays unknown), run the write ``"again"``, or ``"answer"`` with what was found."""
    if found is Lookup.UNKNOWN or (found is Lookup.NOT_DONE and not may_run_again(first)):
        return "raise"
    return "again" if found is Lookup.NOT_DONE else "answer"


def kind_of(exc: Exception) -> str:
    """What an ambiguous failure was, as the model may read it (never an internal class)."""
    if isinstance(exc, OrphanedWrite):
        return "a restart"
    if isinstance(exc, JournalUnreadable):
        return "its journal could not be read"
    if isinstance(exc, AttemptTimeout):
        return "no answer in time"
    if isinstance(exc, ToolRaised):
        return type(exc.original).__name__
    return type(exc).__name__


def rerun_wait(call: Call) -> float | None:
    """How long to wait before running a write again that a lookup did not find: the
    retry policy's first backoff (``initial_delay`` plus jitter, at most ``max_delay``),
    as a retry would wait; `None` when the call's deadline leaves no time for it."""
    retry = call.resolved.policy.retry
    wait = min(retry.initial_delay + random.uniform(0, retry.jitter), retry.max_delay)
    left = _deadline.remaining(call)
    return None if left is not None and left <= wait else wait


def _verified(call: Call, exc: Exception, value: Any) -> Any:
    call.record.served_by = "verify"
    call.record.notices.append(m.VERIFIED_NOTICE.format(kind=kind_of(exc)))
    return value


def _rerun_failed(exc: Exception, call: Call) -> Exception:
    """What a failed verified re-run raises: an ambiguous failure says the write ran
    twice (`RerunUnconfirmed`); any other failure is the answer as it is."""
    return RerunUnconfirmed(kind_of(exc)) if is_unknown_outcome(exc, call) else exc


def unsettled(call: Call) -> OutcomeStillUnknown | None:
    """What the journal could not settle about `call`'s earlier run, if anything."""
    found, call.unsettled = call.unsettled, None  # told once (`Call.unsettled`)
    return found


class _Lookup:
    """One lookup of `call`'s write: the callable, what it is given, and its bounds."""

    __slots__ = ("call", "info", "is_async", "key", "max_abandoned", "timeout", "verify")

    def __init__(self, call: Call) -> None:
        policy = call.resolved.policy
        assert policy.unknown_outcome.verify is not None
        self.call, self.verify, self.timeout = (
            call,
            policy.unknown_outcome.verify,
            policy.unknown_outcome.verify_timeout,
        )
        self.info = VerifyInfo(call.name, dict(call.args), key_for(call), call.id, call.thread_id)
        self.is_async = inspect.iscoroutinefunction(self.verify)
        self.key, self.max_abandoned = f"{call.name}:verify", policy.timeouts.max_abandoned_threads

    def ask(self) -> Any:
        return self.verify(self.info)

    def failed(self) -> Lookup:
        log.warning("verify of %s failed: the outcome stays unknown", self.call.name, exc_info=True)
        return Lookup.UNKNOWN


class VerifyStage(Stage):
    name = "verify"

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return resolved.policy.unknown_outcome.verify is not None and not resolved.idempotent

    # -- the step: what the lookup could not settle, a person may (`pipeline.review`) --

    def mark_answer(self, outcome: Outcome, message: ToolMessage) -> Mapping[str, Any] | None:
        """An unknown outcome whose policy asks a person carries the question."""
        return review.mark(outcome.call, outcome.failure)

    def review_step(self, step: Step, messages: Sequence[ToolMessage], update: StepUpdate) -> None:
        update.questions.update(review.questions(messages))

    # -- I/O: the lookup under its own timeout (a worker thread, or a task) ------------

    def _lookup(self, call: Call) -> Any:
        q = _Lookup(call)
        try:
            if q.is_async:
                found = run_sync(q.ask, q.timeout)
            else:
                found = self.env.runner.run(q.key, q.ask, q.timeout, q.max_abandoned)
        except Exception:
            return q.failed()
        return lookup_outcome(found)

    async def _alookup(self, call: Call) -> Any:
        q = _Lookup(call)
        try:
            if q.is_async:
                found = await await_with_timeout(q.ask, q.timeout)
            else:
                found = await self.env.runner.arun(q.key, q.ask, q.timeout, q.max_abandoned)
        except Exception:
            return q.failed()
        return lookup_outcome(found)

    # -- drivers ----------------------------------------------------------------------

    def wrap(self, call: Call, call_next: Next) -> Any:
        first: Exception | None = unsettled(call)
        if first is None:
            try:
                return call_next(call)
            except Exception as exc:
                if not is_unknown_outcome(exc, call):
                    raise
                first = exc
        found = self._lookup(call)
        action = settle(found, first)
        if action == "raise":
            raise first
        if action == "again":  # once more, with the same key, after a retry's wait
            wait = rerun_wait(call)
            if wait is None:
                raise first
            _testing.sleep(wait)
            try:
                value = call_next(call)
            except Exception as exc:
                raise _rerun_failed(exc, call) from exc
            call.record.notices.append(m.VERIFIED_AGAIN_NOTICE.format(kind=kind_of(first)))
            return value
        return _verified(call, first, found)

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        return self._awrap(call, call_next)

    async def _awrap(self, call: Call, call_next: AsyncNext) -> Any:
        first: Exception | None = unsettled(call)
        if first is None:
            try:
                return await call_next(call)
            except Exception as exc:
                if not is_unknown_outcome(exc, call):
                    raise
                first = exc
        found = await self._alookup(call)
        action = settle(found, first)
        if action == "raise":
            raise first
        if action == "again":
            wait = rerun_wait(call)
            if wait is None:
                raise first
            await _testing.asleep(wait)
            try:
                value = await call_next(call)
            except Exception as exc:
                raise _rerun_failed(exc, call) from exc
            call.record.notices.append(m.VERIFIED_AGAIN_NOTICE.format(kind=kind_of(first)))
            return value
        return _verified(call, first, found)
