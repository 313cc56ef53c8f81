"""The one place where exceptions become model-facing failures.

`classify` maps every exception that leaves the stages (the pipeline's own signals and
whatever the tool raised) to a `Failure`; `text.envelope` renders it. `is_transient`
decides, for the default retry policy, which tool exceptions are worth another attempt.

Whose text the model reads decides what `redacted` takes out of it (`text.redact`'s
docstring states the rule). An exception's text (a ``ToolException``, a ``ValueError``)
is the tool's internals talking: every host path goes but the ones the model sent. A
text a server or tool wrote for the model, `ReportedError` (an MCP ``isError`` result,
an answer that reads as an error report) and `HandledByTool` (the tool's own
``handle_tool_error`` answer, rendered by `text.envelope` as the tool gave it), loses
only what is an internal of the server: code locations (a source file with a line
number), traceback fragments and the host paths it would lose as exception text, but
not the paths it names as where the call may go (a filesystem server's "allowed
directories"). Either way secrets go, the paths the model sent stay, and the tool's
name and argument names are not taken for secret keys.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException
from pydantic import ValidationError

from ..core.call import Call
from ..core.errors import (
    AttemptTimeout,
    CircuitOpen,
    Drained,
    DuplicateCall,
    HandledByTool,
    InvalidArguments,
    JournalUnreadable,
    LeftUnanswered,
    LowQualityResult,
    MalformedCall,
    NotRun,
    OrphanedWrite,
    OutcomeStillUnknown,
    Recorded,
    ReportedError,
    RerunUnconfirmed,
    SessionUnavailable,
    StateUnavailable,
    ThreadsExhausted,
    ToolErrorType,
    ToolRaised,
    UnknownTool,
    WriteInFlight,
)
from ..core.hints import is_rate_limited, not_carried_out, retry_after, status_code
from ..core.idempotency import scrub
from ..core.tools import injected_keys
from ..runtime import deadline as _deadline
from . import messages as m
from .fields import from_pydantic
from .redact import looks_secret_key, redact


def _tool_invocation_error() -> type[BaseException] | None:
    """LangGraph's ``ToolInvocationError`` (langgraph >= 1.1 wraps the argument errors it
    raises itself), if `langgraph.prebuilt` is loaded: when it is not, no such error can
    exist, and a user of the wrapper alone does not pay for importing it."""
    module = sys.modules.get("langgraph.prebuilt.tool_node")
    found = getattr(module, "ToolInvocationError", None)
    return found if isinstance(found, type) else None


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


_NOT_TRANSIENT_OS = (
    FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError,
)  # fmt: skip
_TRANSIENT_NAMES = frozenset(
    {
        "TimeoutException", "TransportError", "NetworkError", "ConnectError", "ConnectTimeout",
        "ReadTimeout", "WriteTimeout", "PoolTimeout", "RemoteProtocolError", "ReadError",
        "APIConnectionError", "APITimeoutError", "RateLimitError", "InternalServerError",
        "ServiceUnavailableError", "ServiceUnavailable", "TooManyRequests", "ClosedResourceError",
        "BrokenResourceError", "McpError",
    }
)  # fmt: skip
_INPUT_ERRORS = (ValueError, LookupError, TypeError)
"""Exception families whose text conventionally describes a bad input: shown (redacted)."""


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` is a failure that another attempt may not meet (the default retry rule).

    An explicit ``retryable`` attribute wins. Then HTTP-like status codes: 408, 429 and
    5xx are transient, other codes are not. Then timeouts, connection and OS errors
    (except file-system errors such as `FileNotFoundError`), and well-known transport
    errors of HTTP and SDK clients, recognised by class name so that none is imported.
    """
    flag = getattr(exc, "retryable", None)
    if isinstance(flag, bool):
        return flag
    group = getattr(exc, "exceptions", None)  # an (anyio) exception group of transport errors
    if isinstance(exc, Exception) and isinstance(group, tuple) and group:
        return all(is_transient(e) for e in group)
    if isinstance(exc, (ToolException, ValidationError, ValueError)):
        return False
    status = status_code(exc)
    if status is not None:
        return status in (408, 429) or status >= 500
    if isinstance(exc, _NOT_TRANSIENT_OS):
        return False
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError, OSError)):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


ERROR_TEXT_PREFIXES: tuple[str, ...] = ("Error: ", "Database error: ", "Error executing tool ")
"""How a result text that is an error report begins (the MCP reference servers, e.g.
mcp-server-sqlite, answer a failed query with a plain ``Database error: ...`` text and no
``isError``). Only the start of the whole answer counts: a result that merely mentions an
error elsewhere is a success."""

_MAX_ERROR_TEXT = 2000
"""A longer answer is a result, whatever its first words."""


def _text_of(content: Any) -> str | None:
    """The text of a tool's answer: a string, or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else b.get("text", "") for b in content if b]
        return " ".join(p for p in parts if isinstance(p, str) and p)
    return None


def _reads_as_error(content: Any) -> str | None:
    """The text of `content` if it is a single text that reads as an error report."""
    if isinstance(content, list):  # one text block; not a list of Commands/ToolMessages
        if len(content) != 1:
            return None
        block = content[0]
        if isinstance(block, dict):
            if block.get("type") != "text":
                return None
            content = block.get("text")
        elif not isinstance(block, str):
            return None
        else:
            content = block
    ok = isinstance(content, str) and len(content) <= _MAX_ERROR_TEXT
    return content if ok and content.startswith(ERROR_TEXT_PREFIXES) else None


def _reported(exc: BaseException) -> bool:
    """Whether `exc` is an error the tool wrote for the model: `ReportedError`, or the
    exception langchain-mcp-adapters raises for an ``isError`` result (it carries the
    result's ``tool_content``), whichever way the tool was called."""
    if isinstance(exc, ReportedError):
        return True
    return isinstance(exc, ToolException) and isinstance(getattr(exc, "tool_content", None), list)


def error_result(value: Any, *, detect_text: bool = True) -> ToolException | None:
    """The error a tool reported by *returning* it, if it did.

    A tool with ``handle_tool_error`` (MCP tools report ``isError`` results this way)
    answers with a ``ToolMessage(status="error")``; with `detect_text`, an answer whose
    whole text reads as an error report (`ERROR_TEXT_PREFIXES`) counts too. Either
    becomes a ``tool_error`` like a raised `ToolException`.
    """
    if isinstance(value, ToolMessage):
        if value.status == "error":  # the tool's own handler answered: its answer stands
            return HandledByTool(_text_of(value.content) or "", value)
        value = value.content
    elif not isinstance(value, (str, list)):
        return None
    if not detect_text:
        return None
    text = _reads_as_error(value)
    return None if text is None else ReportedError(text)


def _strings(args: Any) -> list[tuple[bool, str]]:
    """The string values of the model's arguments (nested too), each with whether it is
    held by a secret-looking name (or inside one)."""
    out: list[tuple[bool, str]] = []
    stack: list[tuple[bool, str, Any]] = [(False, "", args)]
    while stack and len(out) < 100:
        secret, key, value = stack.pop()
        secret = secret or bool(key and looks_secret_key(key))
        if isinstance(value, str):
            out.append((secret, value))
        elif isinstance(value, dict):
            stack.extend((secret, str(k), v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((secret, key, v) for v in value)
    return out


def echoed_values(args: Any) -> list[str]:
    """The string values of the model's arguments (nested too), except under
    secret-looking names: an error may repeat them back to the model."""
    return [v for secret, v in _strings(args) if not secret][:50]


def redacted(text: str, call: Call, *, limit: int = 300, for_model: bool = False) -> str:
    """`text`, said about `call`, as the model may see it (`text.redact` states the rule).

    An exception's text loses every path the model did not send; a text a server or tool
    wrote for the model (`for_model`: an MCP ``isError`` result, the tool's own
    ``handle_tool_error`` answer, an answer that reads as an error report) loses the
    server's internals only: code locations, traceback fragments and host paths, but not
    the paths it names as where the call may go (a filesystem server's allowed
    directories). Either way the values the model sent stay (what it sent under a
    secret-looking name is masked wherever it appears), and the tool's name and its
    argument names are not taken for secrets: the word after one stays.
    """
    strings = _strings(call.args)
    props = m.tool_args_schema(call.tool).get("properties")
    names = [call.name, *(props if isinstance(props, dict) else ())]
    return redact(
        scrub(text, call),
        limit=limit,
        keep=[v for secret, v in strings if not secret],
        paths="internal" if for_model else True,
        names=names,
        secrets=[v for secret, v in strings if secret],
    )


def _validation_fields(exc: BaseException, call: Call) -> list[dict[str, Any]]:
    """``fields`` for a validation error the tool (or ToolNode) raised itself."""
    errors: list[Any] = []
    invocation_error = _tool_invocation_error()
    if invocation_error is not None and isinstance(exc, invocation_error):
        errors = list(getattr(exc, "filtered_errors", None) or ())
        source = getattr(exc, "source", None)
        if not errors and isinstance(source, ValidationError):
            errors = source.errors()
    elif isinstance(exc, ValidationError):
        errors = exc.errors()
    if not errors:
        return []
    schema = m.tool_args_schema(call.tool)
    return from_pydantic(errors, schema, injected_keys(call.tool) | frozenset(call.injected))


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _invalid_args(name: str, call: Call, fields: list[dict[str, Any]]) -> tuple[str, str]:
    """The message and the suggestion (a valid call form) of an ``invalid_arguments``."""
    sentences = " ".join(str(f.get("message", "")) for f in fields[:3])
    message = m.INVALID_ARGS.format(tool=name, n=len(fields))
    return (f"{message} {sentences}".strip(), m.valid_call_form(call.tool, name))


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


def _drained(exc: Drained, call: Call) -> Failure:
    """A call the run's drain did not start: the failure it was not retried after, or
    nothing done at all; either way safe to send again once the run resumes."""
    hint = m.DRAINED_HINT.format(tool=call.name)
    if exc.after is not None:
        failure = _classify(exc.after, call)
        message = f"{failure.message} {m.DRAINED_NOT_RETRIED}"
        extra = {**failure.extra, "shutting_down": True}
        return replace(failure, message=message, suggestion=hint, retryable=True, extra=extra)
    return Failure(
        ToolErrorType.NOT_RUN, m.DRAINED.format(tool=call.name), hint, True, {"shutting_down": True}
    )


def _classify(exc: BaseException, call: Call) -> Failure:
    name = call.name
    policy = call.resolved.policy
    if isinstance(exc, AttemptTimeout):
        if call.idempotent or not exc.started:
            return Failure(
                ToolErrorType.TIMEOUT,
                m.TIMEOUT.format(tool=name, timeout=exc.timeout),
                m.TIMEOUT_HINT,
                True,
            )
        return Failure(
            ToolErrorType.UNKNOWN_OUTCOME,
            m.UNKNOWN_OUTCOME_TIMEOUT.format(tool=name, timeout=exc.timeout),
            m.UNKNOWN_OUTCOME_HINT,
            False,
        )
    if isinstance(exc, ThreadsExhausted):
        return Failure(
            ToolErrorType.TRANSIENT_FAILURE,
            m.BUSY.format(tool=name, n=exc.abandoned),
            m.TRANSIENT_HINT,
            True,
        )
    if isinstance(exc, UnknownTool):
        from difflib import get_close_matches

        close = get_close_matches(exc.name, exc.valid, n=1, cutoff=0.5)
        extra: dict[str, Any] = {"valid_tools": exc.valid}
        hint = m.UNKNOWN_TOOL_HINT.format(valid=", ".join(exc.valid) or "(none)")
        if close:
            extra["closest"] = close[0]
            hint = m.UNKNOWN_TOOL_CLOSEST.format(closest=close[0]) + " " + hint
        return Failure(
            ToolErrorType.UNKNOWN_TOOL,
            m.UNKNOWN_TOOL.format(tool=redact(exc.name, limit=80)),
            hint,
            False,
            extra,
        )
    if isinstance(exc, MalformedCall):
        return Failure(
            ToolErrorType.MALFORMED_CALL,
            m.MALFORMED.format(tool=name, reason=redact(exc.reason, limit=200)),
            m.MALFORMED_HINT.format(signature=m.signature(call.tool, name)),
            False,
        )
    if isinstance(exc, InvalidArguments):
        message, hint = _invalid_args(name, call, exc.fields)
        message = exc.summary or message
        details: dict[str, Any] = {"fields": exc.fields}
        dropped = call.dropped
        if dropped:  # the model should know these were not used either
            message = f"{message} {m.DROPPED_ARGS.format(names=_names(dropped))}"
            details["dropped"] = list(dropped)
        return Failure(ToolErrorType.INVALID_ARGUMENTS, message, hint, False, details)
    if isinstance(exc, CircuitOpen):
        return Failure(
            ToolErrorType.CIRCUIT_OPEN,
            m.CIRCUIT_OPEN.format(tool=name),
            m.CIRCUIT_OPEN_HINT.format(tool=name, s=exc.retry_after_s),
            True,
            {"retry_after_s": round(exc.retry_after_s, 1)},
        )
    if isinstance(exc, Drained):
        return _drained(exc, call)
    if isinstance(exc, StateUnavailable):
        return Failure(
            ToolErrorType.TRANSIENT_FAILURE,
            m.TRANSIENT.format(tool=name, kind=m.STATE_UNAVAILABLE),
            m.TRANSIENT_HINT,
            True,
        )
    if isinstance(exc, SessionUnavailable):
        text = m.SESSION_BLOCKED if exc.reason == "blocked" else m.SESSION_CLOSED
        return Failure(
            ToolErrorType.INTERNAL_ERROR, text.format(tool=name), m.SESSION_HINT, False, cause=exc
        )
    if isinstance(exc, Recorded):
        return _recorded(exc.failure)
    if isinstance(exc, RerunUnconfirmed):
        return _unknown(m.UNKNOWN_OUTCOME_RERUN_FAILED.format(tool=name, kind=exc.kind))
    if isinstance(exc, OrphanedWrite):
        return _unknown(m.ORPHANED_WRITE.format(tool=name, age=m.age_text(exc.seconds_ago)))
    if isinstance(exc, WriteInFlight):
        return _unknown(m.WRITE_IN_FLIGHT.format(tool=name))
    if isinstance(exc, JournalUnreadable):
        return _unknown(m.JOURNAL_UNREADABLE.format(tool=name))
    if isinstance(exc, LeftUnanswered):
        return _unknown(m.LEFT_UNANSWERED.format(tool=name))
    if isinstance(exc, NotRun):
        text = m.NOT_RUN_READ if exc.reads else m.NOT_RUN
        return Failure(
            ToolErrorType.NOT_RUN, text.format(tool=name), m.NOT_RUN_HINT.format(tool=name), True
        )
    if isinstance(exc, OutcomeStillUnknown):
        return _unknown(m.UNKNOWN_OUTCOME_RERUN.format(tool=name))
    if isinstance(exc, DuplicateCall):
        message = m.DUPLICATE_LOOPING if exc.looping else m.DUPLICATE
        if exc.reason == "in_flight":
            message = m.DUPLICATE_IN_FLIGHT
        elif exc.reason == "unknown_outcome":
            message = m.DUPLICATE_UNKNOWN
        elif exc.reason == "landed":
            message = m.DUPLICATE_LANDED
        extra = {"repeats": exc.repeats}
        if exc.looping:
            extra["looping"] = True
        if exc.previous is not None:
            extra["previous_result"] = exc.previous
        ran = m.ran_ago(exc.age)
        if ran:
            extra["ran_s_ago"] = round(exc.age or 0)
        return Failure(
            ToolErrorType.DUPLICATE_CALL,
            message.format(tool=name, n=exc.repeats, ran=ran),
            m.UNKNOWN_OUTCOME_HINT if exc.reason == "unknown_outcome" else m.DUPLICATE_HINT,
            False,
            extra,
        )
    if isinstance(exc, LowQualityResult):
        return Failure(
            ToolErrorType.LOW_QUALITY_RESULT,
            m.LOW_QUALITY.format(tool=name, reason=exc.reason),
            m.LOW_QUALITY_HINT,
            False,
            {"preview": exc.preview},
        )
    if isinstance(exc, ToolRaised):
        return _classify_tool_exception(exc.original, call, policy.output.expose_error_details)
    return Failure(
        ToolErrorType.INTERNAL_ERROR,
        m.INTERNAL.format(tool=name),
        m.INTERNAL_HINT,
        False,
        cause=exc,
    )


def _unknown(message: str) -> Failure:
    """A write that may or may not have taken effect, and was not run again."""
    return Failure(ToolErrorType.UNKNOWN_OUTCOME, message, m.UNKNOWN_OUTCOME_HINT, False)


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
    try:
        error = ToolErrorType(str(data.get("error")))
    except ValueError:
        error = ToolErrorType.INTERNAL_ERROR
    extra = data.get("extra")
    return Failure(
        error,
        str(data.get("message") or ""),
        str(data.get("suggestion") or ""),
        bool(data.get("retryable")),
        dict(extra) if isinstance(extra, Mapping) else {},
    )


def _classify_tool_exception(exc: BaseException, call: Call, expose: bool) -> Failure:
    name = call.name
    fields = _validation_fields(exc, call)
    if fields:
        message, hint = _invalid_args(name, call, fields)
        return Failure(
            ToolErrorType.INVALID_ARGUMENTS,
            message,
            hint,
            False,
            {"fields": fields},
            exc,
        )
    kind = type(exc).__name__
    if is_rate_limited(exc):  # refused before acting on it: not an unknown outcome
        wait = retry_after(exc)
        hint = m.RATE_LIMITED_HINT_NO_WAIT.format(tool=name)
        extra: dict[str, Any] = {}
        if wait is not None:
            extra["retry_after_s"] = round(wait, 1)
            hint = m.RATE_LIMITED_HINT.format(tool=name, s=round(wait, 1))
        return Failure(
            ToolErrorType.RATE_LIMITED, m.RATE_LIMITED.format(tool=name), hint, True, extra, exc
        )
    if not call.idempotent and not_carried_out(exc):  # never sent, or refused (503)
        wait = retry_after(exc)
        extra = {} if wait is None else {"retry_after_s": round(wait, 1)}
        return Failure(
            ToolErrorType.TRANSIENT_FAILURE,
            m.NOT_SENT.format(tool=name, kind=kind),
            m.NOT_SENT_HINT.format(tool=name),
            True,
            extra,
            exc,
        )
    if is_transient(exc):
        if call.idempotent:
            wait = retry_after(exc)  # a 503's hint
            return Failure(
                ToolErrorType.TRANSIENT_FAILURE,
                m.TRANSIENT.format(tool=name, kind=kind),
                m.TRANSIENT_HINT,
                True,
                {} if wait is None else {"retry_after_s": round(wait, 1)},
                exc,
            )
        return Failure(
            ToolErrorType.UNKNOWN_OUTCOME,
            m.UNKNOWN_OUTCOME_FAILURE.format(tool=name, kind=kind),
            m.UNKNOWN_OUTCOME_HINT,
            False,
            cause=exc,
        )
    if isinstance(exc, (ToolException, *_INPUT_ERRORS)) or expose:
        # What the model sent may be echoed back (the path it asked for); what the tool
        # wrote for the model (MCP isError, an error text) keeps the paths it names as
        # where the call may go; secrets, code locations and other host paths never
        # pass, expose_error_details or not.
        text = redacted(str(exc), call, for_model=_reported(exc)) or kind
        message = m.TOOL_ERROR.format(tool=name, text=text)
    else:
        message = m.TOOL_ERROR_OPAQUE.format(tool=name, kind=kind)
    return Failure(ToolErrorType.TOOL_ERROR, message, m.TOOL_ERROR_HINT, False, cause=exc)
