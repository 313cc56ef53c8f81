"""The one place where exceptions become model-facing failures.

`classify` maps every exception that leaves the stages (the pipeline's own signals and
whatever the tool raised) to a `Failure`; `text.envelope` renders it. The mapping is two
tables read in order, one row per signal: `text.rules.SIGNALS` for the pipeline's own
signals and `text.tool_rules.TOOL_ERRORS` for what a tool raised (`ToolRaised`). Two
signals wrap another failure: `Recorded` (a journal receipt's failure, told again) and a
`Drained` that cut a retry short (the failure it did not retry). `error_type` and
`is_unknown_outcome` answer what the failure's type is without writing its text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.call import Call
from ..core.errors import Drained, Recorded, ToolErrorType, ToolRaised
from ..runtime import deadline as _deadline
from . import messages as m
from .redact import looks_secret_key
from .rules import SIGNALS, Rule
from .tool_rules import TOOL_ERRORS


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed call, as the model will be told about it."""

    error: ToolErrorType
    message: str
    suggestion: str
    retryable: bool
    extra: Mapping[str, Any] = field(default_factory=dict)
    cause: BaseException | None = None
    """The exception the tool raised, if any (for developer hooks; never rendered)."""


def rule_for(exc: BaseException, call: Call) -> tuple[BaseException, Rule]:
    """The row that classifies `exc` (for a `ToolRaised`: its tool's exception, read
    from `TOOL_ERRORS`), with the exception that row reads. Not for the two signals that
    wrap another failure (`Recorded`, `Drained` after a failure)."""
    table = SIGNALS
    if isinstance(exc, ToolRaised):
        exc, table = exc.original, TOOL_ERRORS
    for rule in table:
        if rule.matches(exc, call):
            return exc, rule
    raise AssertionError("unreachable: each table ends with a row for any exception")


def error_type(exc: BaseException, call: Call) -> ToolErrorType:
    """The `ToolErrorType` `classify` gives `exc`, without writing the failure's text."""
    if isinstance(exc, Recorded):
        return _recorded_type(exc.failure)
    if isinstance(exc, Drained) and exc.after is not None:
        return error_type(exc.after, call)
    return rule_for(exc, call)[1].error


def is_unknown_outcome(exc: BaseException, call: Call) -> bool:
    """Whether `exc` leaves `call`'s outcome unknown: a write that may have taken effect."""
    return error_type(exc, call) is ToolErrorType.UNKNOWN_OUTCOME


_WAITED = frozenset(
    {
        ToolErrorType.TIMEOUT, ToolErrorType.TRANSIENT_FAILURE, ToolErrorType.UNKNOWN_OUTCOME,
        ToolErrorType.RATE_LIMITED,
    }
)  # fmt: skip
"""Failures of the service (not of the call) whose envelope says how long the call took."""


def classify(exc: BaseException, call: Call) -> Failure:
    """Map `exc`, raised while handling `call`, to the `Failure` the model is shown.

    Failures of the service carry ``waited_s``: how long the call took in all (every
    attempt and wait), so the model and the user can see what the deadline cost; one cut
    by its LangGraph node's time limit (`runtime.deadline.cut_by_node`) says so, with
    ``step_time_limit_s``.
    """
    failure = _classify(exc, call)
    if failure.error in _WAITED and call.record.attempts:
        extra = {**failure.extra, "waited_s": round(_deadline.waited(call), 1)}
        failure = replace(failure, extra=extra)
    if failure.error in _WAITED and not isinstance(exc, Drained):
        limit = _deadline.cut_by_node(call)
        if limit is not None:
            failure = _cut_by_node(failure, call, limit)
    return failure


def _cut_by_node(failure: Failure, call: Call, limit: float) -> Failure:
    """`failure`, which the node's time limit (`limit` s) cut short, saying so."""
    suggestion = failure.suggestion
    if failure.error is ToolErrorType.TIMEOUT:
        suggestion = m.NODE_TIME_LIMIT_HINT.format(limit=limit)
    return replace(
        failure,
        message=f"{failure.message} {m.NODE_TIME_LIMIT.format(limit=limit)}",
        suggestion=suggestion,
        extra={**failure.extra, "step_time_limit_s": round(limit, 1)},
    )


def _classify(exc: BaseException, call: Call) -> Failure:
    if isinstance(exc, Recorded):
        return _recorded(exc.failure)
    if isinstance(exc, Drained) and exc.after is not None:
        return _drained_after(exc.after, call)
    subject, rule = rule_for(exc, call)
    said = rule.say(subject, call)
    cause = subject if rule.cause else None
    extra = dict(said.extra) if said.extra else {}
    return Failure(rule.error, said.message, said.suggestion, rule.retryable, extra, cause)


def _drained_after(after: BaseException, call: Call) -> Failure:
    """A call whose retry the run's drain did not start: the failure it was not retried
    after, safe to send again once the run resumes."""
    failure = _classify(after, call)
    message = f"{failure.message} {m.DRAINED_NOT_RETRIED}"
    extra = {**failure.extra, "shutting_down": True}
    hint = m.DRAINED_HINT.format(tool=call.name)
    return replace(failure, message=message, suggestion=hint, retryable=True, extra=extra)


def _recorded_type(data: Mapping[str, Any]) -> ToolErrorType:
    try:
        return ToolErrorType(str(data.get("error")))
    except ValueError:
        return ToolErrorType.INTERNAL_ERROR


def with_check(failure: Failure, name: str, check: Mapping[str, Any]) -> Failure:
    """`failure`, an unknown outcome, naming the read that shows whether the write took
    effect (``check``: a tool and the arguments to send it, `pipeline.lookups`)."""
    args = check.get("args") or {}
    if any(looks_secret_key(k) for k in args):  # never echo what may be a secret
        return failure
    shown = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()
    )
    hint = m.UNKNOWN_OUTCOME_CHECK.format(check=f"{check['tool']}({shown})", tool=name)
    return replace(failure, suggestion=hint, extra={**failure.extra, "check": dict(check)})


def _recorded(data: Mapping[str, Any]) -> Failure:
    """The failure a journal receipt kept (`pipeline.journal`), as the model was told it."""
    extra = data.get("extra")
    return Failure(
        _recorded_type(data),
        str(data.get("message") or ""),
        str(data.get("suggestion") or ""),
        bool(data.get("retryable")),
        dict(extra) if isinstance(extra, Mapping) else {},
    )
