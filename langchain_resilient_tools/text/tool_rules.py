"""What the model is told about an exception a tool raised: one row per marker.

`TOOL_ERRORS` is read once, in order, as `text.rules.SIGNALS` is: a validation error
of the tool's own arguments, a rate limit, a failure that provably happened before the
request left (retried for a write as for a read), a transient failure (for a write: an
unknown outcome), and then an error whose text may be shown, or one that is only named.
`is_transient` is also the default retry rule.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from langchain_core.tools import ToolException
from pydantic import ValidationError

from ..core.call import Call
from ..core.errors import ToolErrorType
from ..core.hints import is_rate_limited, not_carried_out, retry_after, status_code
from ..core.tools import injected_keys
from . import messages as m
from .fields import from_pydantic
from .reported import redacted, written_for_model
from .rules import Rule, Said, invalid_args

T = ToolErrorType

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


def _tool_invocation_error() -> type[BaseException] | None:
    """LangGraph's ``ToolInvocationError`` (langgraph >= 1.1 wraps the argument errors it
    raises itself), if `langgraph.prebuilt` is loaded: when it is not, no such error can
    exist, and a user of the wrapper alone does not pay for importing it."""
    module = sys.modules.get("langgraph.prebuilt.tool_node")
    found = getattr(module, "ToolInvocationError", None)
    return found if isinstance(found, type) else None


def validation_fields(exc: BaseException, call: Call) -> list[dict[str, Any]]:
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


def _invalid(exc: BaseException, call: Call) -> Said:
    fields = validation_fields(exc, call)
    return invalid_args(call, fields)._replace(extra={"fields": fields})


def _wait(exc: BaseException) -> dict[str, Any]:
    """``retry_after_s``, when the service said how long to wait."""
    wait = retry_after(exc)
    return {} if wait is None else {"retry_after_s": round(wait, 1)}


def _rate_limited(exc: BaseException, call: Call) -> Said:
    extra = _wait(exc)
    hint = m.RATE_LIMITED_HINT_NO_WAIT.format(tool=call.name)
    if extra:
        hint = m.RATE_LIMITED_HINT.format(tool=call.name, s=extra["retry_after_s"])
    return Said(m.RATE_LIMITED.format(tool=call.name), hint, extra)


def _shown(exc: BaseException, call: Call) -> bool:
    """Whether the text of `exc` may be shown (redacted): an input error, a tool's own
    error, or any error when the policy asks for error details."""
    expose = call.resolved.policy.output.expose_error_details
    return isinstance(exc, (ToolException, *_INPUT_ERRORS)) or expose


def _tool_error(exc: BaseException, call: Call) -> Said:
    # What the model sent may be echoed back (the path it asked for); what the tool
    # wrote for the model (MCP isError, an error text) keeps the paths it names as where
    # the call may go; secrets, code locations and other host paths never pass,
    # expose_error_details or not.
    text = redacted(str(exc), call, for_model=written_for_model(exc)) or type(exc).__name__
    return Said(m.TOOL_ERROR.format(tool=call.name, text=text), m.TOOL_ERROR_HINT)


def _kind(exc: BaseException) -> str:
    return type(exc).__name__


TOOL_ERRORS: tuple[Rule, ...] = (
    Rule(BaseException, T.INVALID_ARGUMENTS, False, _invalid,
         when=lambda e, c: bool(validation_fields(e, c)), cause=True),
    # Refused before acting on it: not an unknown outcome.
    Rule(BaseException, T.RATE_LIMITED, True, _rate_limited,
         when=lambda e, c: is_rate_limited(e), cause=True),
    # Never sent, or refused (a 503 with Retry-After): safe to send a write again.
    Rule(BaseException, T.TRANSIENT_FAILURE, True, lambda e, c: Said(
        m.NOT_SENT.format(tool=c.name, kind=_kind(e)), m.NOT_SENT_HINT.format(tool=c.name),
        _wait(e),
    ), when=lambda e, c: not c.idempotent and not_carried_out(e), cause=True),
    Rule(BaseException, T.TRANSIENT_FAILURE, True, lambda e, c: Said(
        m.TRANSIENT.format(tool=c.name, kind=_kind(e)), m.TRANSIENT_HINT, _wait(e),  # a 503's
    ), when=lambda e, c: c.idempotent and is_transient(e), cause=True),
    Rule(BaseException, T.UNKNOWN_OUTCOME, False, lambda e, c: Said(
        m.UNKNOWN_OUTCOME_FAILURE.format(tool=c.name, kind=_kind(e)), m.UNKNOWN_OUTCOME_HINT,
    ), when=lambda e, c: is_transient(e), cause=True),
    Rule(BaseException, T.TOOL_ERROR, False, _tool_error, when=_shown, cause=True),
    Rule(BaseException, T.TOOL_ERROR, False, lambda e, c: Said(
        m.TOOL_ERROR_OPAQUE.format(tool=c.name, kind=_kind(e)), m.TOOL_ERROR_HINT,
    ), cause=True),
)  # fmt: skip
"""What a tool raised, in the order the markers are tried."""
