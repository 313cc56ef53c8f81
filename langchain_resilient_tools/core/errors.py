"""Error vocabulary: what the model is told (`ToolErrorType`) and the internal signals.

The model-facing side is the `ToolErrorType` enum: the ``error`` key of every envelope.
The pipeline side is a small exception tree. Stages raise these to say *why* a call
failed; `text.classify.classify` is the one place that maps them, and every foreign
exception, to an envelope::

    ResilienceSignal                  base of everything the pipeline raises itself
    ├── ToolRaised                    the tool (or the layers under us) raised: `.original`
    ├── AttemptTimeout                one attempt ran past its timeout
    │                                 (`.started` says whether the tool had begun)
    ├── ThreadsExhausted              the tool already holds too many abandoned threads
    ├── Superseded                    a hedge race was decided before this attempt began
    ├── UnknownTool                   no tool by that name
    ├── MalformedCall                 the arguments could not be parsed
    ├── InvalidArguments              the arguments do not fit the schema (`.fields`)
    ├── CircuitOpen                   the tool's breaker is open (`.retry_after_s`)
    ├── DuplicateCall                 a repeat that must not run again
    ├── OutcomeStillUnknown           a re-run of a write whose first run is unconfirmed
    │   ├── OrphanedWrite             a journaled write whose worker died before its receipt
    │   ├── WriteInFlight             a journaled write another live worker still runs
    │   ├── JournalUnreadable         a write whose journal entry could not be read
    │   ├── RerunUnconfirmed          a verified re-run of a write did not confirm either
    │   └── LeftUnanswered            a write a stopped run left unanswered, no journal to tell
    ├── NotRun                        a call a stopped run left unanswered that did not run
    ├── Recorded                      a journal receipt's failure, answered again
    ├── LowQualityResult              a successful call whose result is useless
    ├── StateUnavailable              the shared state store failed (``Shared(on_error="closed")``)
    ├── Drained                       the run is draining: nothing new was started (`.after`)
    └── SessionUnavailable            a session-bound tool's event loop cannot run a sync call

`UsageError` is developer-facing: a wrong configuration raises it at construction time
and it never reaches the model. So is an exception marked `for_author` (a wiring bug of
the graph, such as a tool returning an invalid `Command`): it passes through the
pipeline as control flow does, and the graph raises it as `ToolNode` would.

`ReportedError` is an error a tool reported in its answer, and `HandledByTool` the error
a tool answered *itself* (its own ``handle_tool_error`` or ``handle_validation_error``):
the tool's own message is the answer the model sees. `BackendError` is a shared state
store's failure, which `ToolPolicy.on_backend_error` decides about. Every exception the
package defines is here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException


class ToolErrorType(enum.StrEnum):
    """The ``error`` value of the envelope the model sees (``str()`` is the value)."""

    INVALID_ARGUMENTS = "invalid_arguments"
    MALFORMED_CALL = "malformed_call"
    UNKNOWN_TOOL = "unknown_tool"
    TIMEOUT = "timeout"
    UNKNOWN_OUTCOME = "unknown_outcome"
    TRANSIENT_FAILURE = "transient_failure"
    RATE_LIMITED = "rate_limited"
    TOOL_ERROR = "tool_error"
    CIRCUIT_OPEN = "circuit_open"
    DUPLICATE_CALL = "duplicate_call"
    LOW_QUALITY_RESULT = "low_quality_result"
    INTERNAL_ERROR = "internal_error"
    NOT_RUN = "not_run"
    """A call its run left unanswered (cancelled, interrupted, its worker stopped) before
    it started: nothing was done, and it may be sent again."""


_FOR_AUTHOR = "_lrt_for_author"


def for_author(exc: BaseException) -> BaseException:
    """Mark `exc` as a mistake only the graph's author can fix (it is raised, never
    answered). The exception keeps its type and text, as `ToolNode` raises it."""
    setattr(exc, _FOR_AUTHOR, True)
    return exc


def is_for_author(exc: BaseException) -> bool:
    return getattr(exc, _FOR_AUTHOR, False) is True


class UsageError(ValueError):
    """A developer mistake in configuration; raised at construction, never shown to a model."""


class ResilienceSignal(Exception):
    """Base of the exceptions the pipeline raises to describe a failed call."""


class ToolRaised(ResilienceSignal):
    """The tool, or a layer below the pipeline, raised `original`."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(type(original).__name__)
        self.original = original


class AttemptTimeout(ResilienceSignal):
    """One attempt did not finish within `timeout` seconds."""

    def __init__(self, timeout: float, *, started: bool = True, late: Any = None) -> None:
        super().__init__(f"no answer within {timeout:g} s")
        self.timeout = timeout
        self.started = started
        self.late = late
        """The attempt, still running on its thread (a `runtime.job.Job`), when a sync
        tool was abandoned at the deadline: it may yet take effect (`pipeline.dedup`
        waits for it before a write is sent again)."""


class ThreadsExhausted(ResilienceSignal):
    """The tool holds `abandoned` threads from earlier timeouts; it is not run again yet."""

    def __init__(self, abandoned: int) -> None:
        super().__init__(f"{abandoned} earlier calls are still running")
        self.abandoned = abandoned


class Superseded(ResilienceSignal):
    """A losing attempt of a hedged call that had not reached its tool when another
    attempt answered: it never runs (`core.probe.Probe.supersede`). Its race is already
    decided, so no call is ever answered with it."""

    def __init__(self) -> None:
        super().__init__("the call was answered by another attempt")


class UnknownTool(ResilienceSignal):
    """The model asked for a tool that does not exist."""

    def __init__(self, name: str, valid: Sequence[str]) -> None:
        super().__init__(name)
        self.name = name
        self.valid = list(valid)


class MalformedCall(ResilienceSignal):
    """The call's arguments could not be read as a JSON object."""

    def __init__(self, reason: str, *, raw: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.raw = raw


class InvalidArguments(ResilienceSignal):
    """The arguments do not fit the tool's schema; `fields` lists each problem."""

    def __init__(self, fields: Sequence[Mapping[str, Any]], *, summary: str = "") -> None:
        super().__init__(summary or f"{len(fields)} argument problem(s)")
        self.fields = [dict(f) for f in fields]
        self.summary = summary


class CircuitOpen(ResilienceSignal):
    """The tool's circuit breaker is open; the tool was not called."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"circuit open for {retry_after_s:.1f} s")
        self.retry_after_s = retry_after_s


class OutcomeStillUnknown(ResilienceSignal):
    """This very call ran before (a step re-run on resume) and its outcome is unknown."""


class OrphanedWrite(OutcomeStillUnknown):
    """The journal holds this write's intent but no receipt, and the worker that started
    it is gone: it may or may not have taken effect. It is not run again (but after a
    `verify` lookup that found nothing)."""

    def __init__(self, *, seconds_ago: float) -> None:
        super().__init__("orphaned write")
        self.seconds_ago = seconds_ago


class WriteInFlight(OutcomeStillUnknown):
    """Another worker, still alive, runs this very write and gave no receipt in time."""


class JournalUnreadable(OutcomeStillUnknown):
    """The journal's store failed (or stayed locked past the deadline) before it could
    tell whether this write already ran (a step resumed after a crash looks the same as a
    first run): it may or may not have taken effect. It is not run (but after a `verify`
    lookup that found nothing)."""

    def __init__(self) -> None:
        super().__init__("journal unreadable")


class RerunUnconfirmed(OutcomeStillUnknown):
    """A write whose outcome was unknown was looked up (`verify`), not found, and sent once
    more; that run did not confirm either (`.kind`: what it failed with, as the model may
    read it). It ran twice, and is not sent a third time."""

    def __init__(self, kind: str) -> None:
        super().__init__("verified re-run unconfirmed")
        self.kind = kind


class LeftUnanswered(OutcomeStillUnknown):
    """A write that a stopped run (cancelled, or its worker gone) left without an answer,
    and no journal entry tells whether it started: none was kept for it (no journal, or
    ``journal=False``), or it may have expired. It may or may not have taken effect."""

    def __init__(self) -> None:
        super().__init__("left unanswered")


class NotRun(ResilienceSignal):
    """A call that a stopped run left without an answer, and that did not run: the
    journal holds no intent for it (a write never started), or it only reads (`reads`:
    whether it ran or not, nothing was changed and sending it again is safe)."""

    def __init__(self, *, reads: bool) -> None:
        super().__init__("not run")
        self.reads = reads


class Recorded(ResilienceSignal):
    """The failure a journal receipt recorded for this call, answered again."""

    def __init__(self, failure: Mapping[str, Any]) -> None:
        super().__init__(str(failure.get("error", "")))
        self.failure = dict(failure)


class DuplicateCall(ResilienceSignal):
    """The same call was made before and must not run again."""

    def __init__(
        self,
        *,
        previous: str | None,
        repeats: int,
        looping: bool = False,
        reason: str = "done",
        age: float | None = None,
    ) -> None:
        super().__init__("duplicate call")
        self.previous = previous
        self.repeats = repeats
        self.looping = looping
        self.reason = reason
        """``done`` (it ran before), ``in_flight`` (still running), ``unknown_outcome``, or
        ``landed`` (its outcome was unknown, and its attempt took effect after all)."""
        self.age = age
        """Seconds since the earlier call was made (the ledger's clock), if known."""


class StateUnavailable(ResilienceSignal):
    """The shared state store failed and the policy fails closed; the tool was not called."""

    def __init__(self) -> None:
        super().__init__("shared state store unavailable")


class Drained(ResilienceSignal):
    """The run was asked to drain (LangGraph's ``RunControl.request_drain()``: a server
    shutting down), so what `what` names was not started: the first run of a write
    (``"write"``), a breaker's half-open probe (``"probe"``), or another attempt after a
    failure (``"retry"``, `after`: the failure not retried). Nothing was done that the
    failure does not say; the call is safe to send again once the run resumes."""

    def __init__(self, what: str, *, after: BaseException | None = None) -> None:
        super().__init__(f"draining: no {what} started")
        self.what = what
        self.after = after


class LowQualityResult(ResilienceSignal):
    """The tool answered, but a result check found the answer useless."""

    def __init__(self, reason: str, *, preview: str, value: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.preview = preview
        self.value = value


class SessionUnavailable(ResilienceSignal):
    """A tool bound to a session on another event loop cannot be run from this sync call:
    that loop is closed or not running (``reason="closed"``), or it is blocked, usually
    by this very call made from a coroutine on it (``reason="blocked"``). The tool was
    not called."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"session loop {reason}")
        self.reason = reason


class ReportedError(ToolException):
    """An error the tool reported in its answer (an MCP ``isError`` result, or a text
    that reads as an error report): written by the tool for the model, so its text is
    shown without secrets and the server's internals only (`redacted`)."""


class HandledByTool(ReportedError):
    """An error the tool answered itself, with its own ``handle_tool_error`` or
    ``handle_validation_error``: `answer` is the tool's ``ToolMessage(status="error")``.

    It fails the call like any `ToolException` (stats, breaker, ``tool_errors``; never
    retried), but the model is shown the tool's own answer, as `ToolNode` shows it: the
    tool's author chose that text (MCP tools report ``isError`` results this way), so it
    loses secrets and the server's internals only (`redacted`)."""

    def __init__(self, text: str, answer: ToolMessage) -> None:
        super().__init__(text)
        self.answer = answer


class BackendError(Exception):
    """The state store failed (unreachable, timed out, refused): `__cause__` says how."""

    def __init__(self, message: str, *, lock_wait: bool = False) -> None:
        super().__init__(message)
        self.lock_wait = lock_wait
        """Whether another writer held a lock the operation needed (SQLite's "database is
        locked", a PostgreSQL lock or serialization conflict): over in a moment, so the
        operation is worth trying again (`state.backend.is_lock_wait`)."""


class IgnoredOptionWarning(UserWarning):
    """An option set for a tool cannot take effect there (a retry or a hedge on a tool
    treated as a write; limits meant for every worker on a store that can keep them per
    process only). Filter it with ``warnings.filterwarnings("ignore",
    category=IgnoredOptionWarning)``, or follow the fix it names."""
