"""What the model is told about each of the pipeline's own signals: one row per signal.

A `Rule` names a signal (an exception type, and a condition on it and the call where
the type alone does not decide), the `ToolErrorType` it is, whether another attempt
may help, and `say`: the message, the suggestion and the extra keys of its envelope.
`text.classify` reads `SIGNALS` once, in order, and takes the first row that matches;
what a tool raised is read the same way from `text.tool_rules.TOOL_ERRORS`. Adding a
signal is adding a row (and its sentences to `text.messages`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any, NamedTuple

from ..core.call import Call
from ..core.errors import (
    AttemptTimeout,
    CircuitOpen,
    Drained,
    DuplicateCall,
    InvalidArguments,
    JournalUnreadable,
    LeftUnanswered,
    LowQualityResult,
    MalformedCall,
    NotRun,
    OrphanedWrite,
    OutcomeStillUnknown,
    RerunUnconfirmed,
    SessionUnavailable,
    StateUnavailable,
    ThreadsExhausted,
    ToolErrorType,
    UnknownTool,
    WriteInFlight,
)
from . import messages as m
from .redact import redact

T = ToolErrorType


class Said(NamedTuple):
    """What an envelope says besides its type: its message, its suggestion, and the
    optional keys that carry detail (``fields``, ``retry_after_s``...)."""

    message: str
    suggestion: str
    extra: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of a classification table."""

    signal: type[BaseException]
    error: ToolErrorType
    retryable: bool
    say: Callable[[Any, Call], Said]
    """The envelope's text, from the exception (of type `signal`) and the call."""
    when: Callable[[Any, Call], bool] | None = None
    """A condition beyond the type (`None`: the type decides)."""
    cause: bool = False
    """Whether the exception is kept as the failure's ``cause`` (for developer hooks)."""

    def matches(self, exc: BaseException, call: Call) -> bool:
        return isinstance(exc, self.signal) and (self.when is None or self.when(exc, call))


def unknown(message: str) -> Said:
    """A write that may or may not have taken effect, and was not run again."""
    return Said(message, m.UNKNOWN_OUTCOME_HINT)


def invalid_args(call: Call, fields: Sequence[Mapping[str, Any]]) -> Said:
    """The message and the suggestion (a valid call form) of an ``invalid_arguments``,
    with the problems per field."""
    sentences = " ".join(str(f.get("message", "")) for f in fields[:3])
    message = m.INVALID_ARGS.format(tool=call.name, n=len(fields))
    return Said(f"{message} {sentences}".strip(), m.valid_call_form(call.tool, call.name))


def _unknown_tool(exc: UnknownTool, call: Call) -> Said:
    close = get_close_matches(exc.name, exc.valid, n=1, cutoff=0.5)
    extra: dict[str, Any] = {"valid_tools": exc.valid}
    hint = m.UNKNOWN_TOOL_HINT.format(valid=", ".join(exc.valid) or "(none)")
    if close:
        extra["closest"] = close[0]
        hint = m.UNKNOWN_TOOL_CLOSEST.format(closest=close[0]) + " " + hint
    return Said(m.UNKNOWN_TOOL.format(tool=redact(exc.name, limit=80)), hint, extra)


def _invalid_arguments(exc: InvalidArguments, call: Call) -> Said:
    said = invalid_args(call, exc.fields)
    message = exc.summary or said.message
    details: dict[str, Any] = {"fields": exc.fields}
    if call.dropped:  # the model should know these were not used either
        names = ", ".join(f"'{n}'" for n in call.dropped)
        message = f"{message} {m.DROPPED_ARGS.format(names=names)}"
        details["dropped"] = list(call.dropped)
    return Said(message, said.suggestion, details)


_DUPLICATE_TEXTS = {
    "in_flight": m.DUPLICATE_IN_FLIGHT,
    "unknown_outcome": m.DUPLICATE_UNKNOWN,
    "landed": m.DUPLICATE_LANDED,
}


def _duplicate(exc: DuplicateCall, call: Call) -> Said:
    looped = m.DUPLICATE_LOOPING if exc.looping else m.DUPLICATE
    message = _DUPLICATE_TEXTS.get(exc.reason, looped)
    extra: dict[str, Any] = {"repeats": exc.repeats}
    if exc.looping:
        extra["looping"] = True
    if exc.previous is not None:
        extra["previous_result"] = exc.previous
    ran = m.ran_ago(exc.age)
    if ran:
        extra["ran_s_ago"] = round(exc.age or 0)
    hint = m.UNKNOWN_OUTCOME_HINT if exc.reason == "unknown_outcome" else m.DUPLICATE_HINT
    return Said(message.format(tool=call.name, n=exc.repeats, ran=ran), hint, extra)


def _before_effect(exc: AttemptTimeout, call: Call) -> bool:
    """A timed-out attempt that cannot have taken effect: a read, or one never started."""
    return call.idempotent or not exc.started


SIGNALS: tuple[Rule, ...] = (
    Rule(AttemptTimeout, T.TIMEOUT, True, lambda e, c: Said(
        m.TIMEOUT.format(tool=c.name, timeout=e.timeout), m.TIMEOUT_HINT,
    ), when=_before_effect),
    Rule(AttemptTimeout, T.UNKNOWN_OUTCOME, False, lambda e, c: unknown(
        m.UNKNOWN_OUTCOME_TIMEOUT.format(tool=c.name, timeout=e.timeout),
    )),
    Rule(ThreadsExhausted, T.TRANSIENT_FAILURE, True, lambda e, c: Said(
        m.BUSY.format(tool=c.name, n=e.abandoned), m.TRANSIENT_HINT,
    )),
    Rule(UnknownTool, T.UNKNOWN_TOOL, False, _unknown_tool),
    Rule(MalformedCall, T.MALFORMED_CALL, False, lambda e, c: Said(
        m.MALFORMED.format(tool=c.name, reason=redact(e.reason, limit=200)),
        m.MALFORMED_HINT.format(signature=m.signature(c.tool, c.name)),
    )),
    Rule(InvalidArguments, T.INVALID_ARGUMENTS, False, _invalid_arguments),
    Rule(CircuitOpen, T.CIRCUIT_OPEN, True, lambda e, c: Said(
        m.CIRCUIT_OPEN.format(tool=c.name),
        m.CIRCUIT_OPEN_HINT.format(tool=c.name, s=e.retry_after_s),
        {"retry_after_s": round(e.retry_after_s, 1)},
    )),
    # A drain that cut a retry short (`Drained.after`) says what the failure said: see
    # `text.classify`. One that started nothing:
    Rule(Drained, T.NOT_RUN, True, lambda e, c: Said(
        m.DRAINED.format(tool=c.name), m.DRAINED_HINT.format(tool=c.name),
        {"shutting_down": True},
    )),
    Rule(StateUnavailable, T.TRANSIENT_FAILURE, True, lambda e, c: Said(
        m.TRANSIENT.format(tool=c.name, kind=m.STATE_UNAVAILABLE), m.TRANSIENT_HINT,
    )),
    Rule(SessionUnavailable, T.INTERNAL_ERROR, False, lambda e, c: Said(
        (m.SESSION_BLOCKED if e.reason == "blocked" else m.SESSION_CLOSED).format(tool=c.name),
        m.SESSION_HINT,
    ), cause=True),
    Rule(RerunUnconfirmed, T.UNKNOWN_OUTCOME, False, lambda e, c: unknown(
        m.UNKNOWN_OUTCOME_RERUN_FAILED.format(tool=c.name, kind=e.kind),
    )),
    Rule(OrphanedWrite, T.UNKNOWN_OUTCOME, False, lambda e, c: unknown(
        m.ORPHANED_WRITE.format(tool=c.name, age=m.age_text(e.seconds_ago)),
    )),
    Rule(WriteInFlight, T.UNKNOWN_OUTCOME, False, lambda e, c: unknown(
        m.WRITE_IN_FLIGHT.format(tool=c.name),
    )),
    Rule(JournalUnreadable, T.UNKNOWN_OUTCOME, False, lambda e, c: unknown(
        m.JOURNAL_UNREADABLE.format(tool=c.name),
    )),
    Rule(LeftUnanswered, T.UNKNOWN_OUTCOME, False, lambda e, c: unknown(
        m.LEFT_UNANSWERED.format(tool=c.name),
    )),
    Rule(NotRun, T.NOT_RUN, True, lambda e, c: Said(
        (m.NOT_RUN_READ if e.reads else m.NOT_RUN).format(tool=c.name),
        m.NOT_RUN_HINT.format(tool=c.name),
    )),
    Rule(OutcomeStillUnknown, T.UNKNOWN_OUTCOME, False, lambda e, c: unknown(
        m.UNKNOWN_OUTCOME_RERUN.format(tool=c.name),
    )),
    Rule(DuplicateCall, T.DUPLICATE_CALL, False, _duplicate),
    Rule(LowQualityResult, T.LOW_QUALITY_RESULT, False, lambda e, c: Said(
        m.LOW_QUALITY.format(tool=c.name, reason=e.reason), m.LOW_QUALITY_HINT,
        {"preview": e.preview},
    )),
    # What a tool raised (`ToolRaised`) is read from `text.tool_rules.TOOL_ERRORS`.
    # Anything else is a bug of the layer:
    Rule(BaseException, T.INTERNAL_ERROR, False, lambda e, c: Said(
        m.INTERNAL.format(tool=c.name), m.INTERNAL_HINT,
    ), cause=True),
)  # fmt: skip
"""The pipeline's own signals, in the order they are tried (a subclass before its base:
`OrphanedWrite` and its siblings before `OutcomeStillUnknown`)."""
