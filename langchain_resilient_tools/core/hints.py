"""Failures that say the request was not carried out: is an exception a refusal, and
how long to wait.

A service that rate limits a request refuses it *before* acting on it (HTTP 429 "Too Many
Requests"), and so does one that answers 503 with a ``Retry-After`` ("come back later");
a request that never reached the service (the connection was refused, its host name did
not resolve, connecting timed out) was never sent at all. Even a write that failed this
way did not take effect: `not_carried_out` says so, and it is the one rule that retry,
the breaker and the error envelope read. Any other failure after the request left (a
reset, a read timeout, a 500) is ambiguous. Clients say these things in different ways;
`retry_after` reads the common ones without importing any client:

- a ``retry_after`` (or ``retry_after_s``) attribute in seconds (many SDKs, e.g. Slack's
  and Discord's clients, and `CircuitOpen`-like errors of other libraries);
- a ``Retry-After`` header on the exception's ``response`` (httpx, requests, the OpenAI
  and Anthropic SDKs) or on the exception itself (``headers``), in seconds or as an
  HTTP date.

All of it is pure: no clock but the wall clock an HTTP date needs.
"""

from __future__ import annotations

import email.utils
import errno
import socket
import time
from collections.abc import Mapping
from typing import Any

_LIMITED_NAMES = frozenset({"RateLimitError", "TooManyRequests", "RateLimitExceeded"})
"""Exception class names (in the MRO) that mean "rate limited" in common SDKs."""


def status_code(exc: BaseException) -> int | None:
    """The HTTP-like status code `exc` (or its ``response``) carries, if any."""
    for holder in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status", "code"):
            value = getattr(holder, attr, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    return None


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, Mapping):  # a plain dict: any case
            value = next((v for k, v in headers.items() if str(k).lower() == name.lower()), None)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def _parse_retry_after(text: str) -> float | None:
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def retry_after(exc: BaseException) -> float | None:
    """The wait in seconds the service (or client) asked for before another try, if any."""
    for attr in ("retry_after", "retry_after_s"):
        value = getattr(exc, attr, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
    for holder in (getattr(exc, "response", None), exc):
        text = _header(getattr(holder, "headers", None), "Retry-After")
        if text is not None:
            return _parse_retry_after(text)
    return None


def is_rate_limited(exc: BaseException) -> bool:
    """Whether `exc` says the service refused the request because of a rate limit:
    HTTP 429, a retry hint on the exception, or a well-known rate-limit exception class."""
    status = status_code(exc)
    if status == 429:
        return True
    if status is not None:  # another status (a 503 with Retry-After: maybe half done)
        return False
    if retry_after(exc) is not None:
        return True
    return any(cls.__name__ in _LIMITED_NAMES for cls in type(exc).__mro__)


_NOT_SENT_ERRNOS = frozenset(
    {errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL}
)
"""OS errors of a connect(): the connection was never made, so nothing was sent."""

_NOT_SENT_NAMES = frozenset(
    {
        "ConnectError", "ConnectTimeout",  # httpx (and the SDKs built on it)
        "ConnectTimeoutError", "NewConnectionError", "NameResolutionError",  # urllib3
        "ClientConnectorError", "ClientConnectorDNSError", "ConnectionTimeoutError",  # aiohttp
    }
)  # fmt: skip
"""Exception class names (in the MRO) that mean "could not connect": requests'
``ConnectTimeout`` is a subclass of ``ConnectionError`` named ``ConnectTimeout``; its
plain ``ConnectionError`` is ambiguous, and is decided by what it wraps."""


def _connect_failed(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionRefusedError, socket.gaierror)):
        return True
    if isinstance(exc, OSError) and exc.errno in _NOT_SENT_ERRNOS:
        return True
    return any(cls.__name__ in _NOT_SENT_NAMES for cls in type(exc).__mro__)


def never_sent(exc: BaseException) -> bool:
    """Whether `exc` says the request never left: the connection was refused or could not
    be made, the host name did not resolve, or connecting timed out. Looks through what
    clients wrap (``__cause__``, ``__context__``, urllib3's ``reason``, an SDK's
    connection error), a few levels deep, so that ``requests.ConnectionError`` wrapping
    a refused connection counts and one wrapping a reset does not."""
    todo: list[BaseException] = [exc]
    for _ in range(6):  # a few levels: clients wrap once or twice
        if not todo:
            return False
        current = todo.pop()
        if _connect_failed(current):
            return True
        reason = getattr(current, "reason", None)
        wrapped = [current.__cause__, current.__context__]
        if isinstance(reason, BaseException):
            wrapped.append(reason)
        todo.extend(e for e in wrapped if e is not None and e is not current)
    return False


def not_carried_out(exc: BaseException) -> bool:
    """Whether `exc` provably means the service did not act on the request: it never left
    (`never_sent`), or the service refused it before acting (HTTP 429, a rate-limit
    error, or a 503 with a ``Retry-After``). Such a failure is retried for a write as
    for a read; any other failure of a write is an unknown outcome."""
    if is_rate_limited(exc) or never_sent(exc):
        return True
    return status_code(exc) == 503 and retry_after(exc) is not None
