"""Is a failure the service's fault? Shared by the breaker, the fallback chain and retry.

A *service failure* is one that says nothing about the call itself: a timeout, a busy
tool, an open circuit, or an exception the retry policy treats as transient (connection
errors, HTTP 429/5xx, ...). A bad argument (`ValueError`, a validation error, a
`ToolException`) is not: the service answered, the question was wrong. Such failures do
not trip the breaker and are never answered from a fallback.
"""

from __future__ import annotations

from ..core.call import Call
from ..core.errors import AttemptTimeout, CircuitOpen, Superseded, ThreadsExhausted, ToolRaised
from ..core.hints import not_carried_out
from ..text.tool_rules import is_transient


def is_service_failure(exc: BaseException, call: Call) -> bool:
    """Whether `exc`, raised for `call`, is an infrastructure failure of the tool's service."""
    if isinstance(exc, (AttemptTimeout, ThreadsExhausted, CircuitOpen)):
        return True
    return isinstance(exc, ToolRaised) and retry_wants(exc.original, call)


def retry_wants(original: BaseException, call: Call) -> bool:
    """Whether `call`'s retry policy counts `original`, raised by the tool, as transient:
    its `retry_on` types or predicate, else the default rule (`is_transient`)."""
    retry_on = call.resolved.policy.retry.retry_on
    if retry_on is None:
        return is_transient(original)
    if isinstance(retry_on, (type, tuple)):
        return isinstance(original, retry_on)
    return bool(retry_on(original))


def surely_not_executed(exc: BaseException) -> bool:
    """Whether the tool certainly did not run (so even a write may be answered otherwise)."""
    if isinstance(exc, (CircuitOpen, ThreadsExhausted, Superseded)):
        return True
    if isinstance(exc, ToolRaised) and not_carried_out(exc.original):
        return True  # never sent, or refused by the service before it acted (429, 503)
    return isinstance(exc, AttemptTimeout) and not exc.started
