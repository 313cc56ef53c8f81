"""Rate limits a service reports: is an exception a refusal, and how long to wait.

A service that rate limits a request refuses it *before* acting on it (HTTP 429 "Too Many
Requests"), so even a write refused this way did not take effect. Clients say so in
different ways; `retry_after` reads the common ones without importing any client:

- a ``retry_after`` (or ``retry_after_s``) attribute in seconds (many SDKs, e.g. Slack's
  and Discord's clients, and `CircuitOpen`-like errors of other libraries);
- a ``Retry-After`` header on the exception's ``response`` (httpx, requests, the OpenAI
  and Anthropic SDKs) or on the exception itself (``headers``), in seconds or as an
  HTTP date.

All of it is pure: no clock but the wall clock an HTTP date needs.
"""

from __future__ import annotations

import email.utils
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
