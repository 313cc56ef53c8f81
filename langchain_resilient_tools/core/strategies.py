"""The options of the strategies that send a call again or stop sending it: retry (with
its budget), hedged reads, the circuit breaker, the adaptive timeout.

Shorthands: ``retry=3`` is ``RetryPolicy(max_attempts=3)`` and ``retry=None`` one
attempt; ``hedge="auto"`` / ``hedge=0.2`` is ``Hedge(delay=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .errors import UsageError
from .frozen import Options
from .hooks import RetryOn


class RetryBudget(Options):
    """A retry budget, shared by all calls of one tool: within `window` seconds at most
    ``min + ratio * calls`` retries are made, so a failing service does not get a retry
    storm. The default lets a service failing 30% of calls recover nearly every call
    while a service that is down gets at most 1.5 times its normal load instead of
    `RetryPolicy.max_attempts` times."""

    ratio: float = Field(default=0.5, ge=0)
    """Retries allowed per call made."""
    min: int = Field(default=10, ge=0)
    """Retries always allowed per `window`, however few calls were made."""
    window: float = Field(default=10.0, gt=0)
    """Length in seconds of the sliding window the budget counts over (in ten slices: a
    call may be forgotten up to a tenth of the window early)."""


class RetryPolicy(Options):
    """Exponential backoff with jitter, driven by tenacity (idempotent tools only).
    Shorthands: ``retry=3`` (`max_attempts`), ``retry=None`` (one attempt)."""

    max_attempts: int = Field(default=3, ge=1, le=100)
    """Attempts in all, the first call included (1 turns retry off)."""
    initial_delay: float = Field(default=0.5, ge=0)
    """Seconds to wait before the first retry."""
    max_delay: float = Field(default=10.0, ge=0)
    """Upper bound of any single wait, in seconds."""
    multiplier: float = Field(default=2.0, ge=1)
    """Each wait is the previous one times this."""
    jitter: float = Field(default=0.5, ge=0)
    """Up to this many random seconds are added to each wait."""
    retry_on: RetryOn | None = None
    """Exception types, or a predicate, that are worth another attempt. `None` retries
    transient failures: timeouts, connection and OS errors, HTTP 429/5xx, and exceptions
    that carry ``retryable = True``. `ValueError`, `ToolException` and validation errors
    are never retried by default."""
    retry_refused_writes: bool = True
    """Retry a call that is not safe to repeat when its failure says it was not carried
    out: the request never left (connection refused, DNS failure, a connect timeout of
    httpx, aiohttp, requests or urllib3) or the service refused it before acting (HTTP
    429, a rate-limit error, a 503 with ``Retry-After``). It is not an unknown outcome.
    `False`: such calls are never retried."""
    budget: RetryBudget | None = RetryBudget()
    """The tool's retry budget (hedges take from it too); `None` turns it off."""

    @model_validator(mode="after")
    def _check(self) -> RetryPolicy:
        if self.max_delay < self.initial_delay:
            raise UsageError("RetryPolicy.max_delay must be >= initial_delay")
        ro = self.retry_on
        if ro is not None and not (
            _is_exc_type(ro)
            or (isinstance(ro, tuple) and all(_is_exc_type(t) for t in ro))
            or (callable(ro) and not isinstance(ro, type))
        ):
            raise UsageError("RetryPolicy.retry_on takes exception types or a predicate")
        return self

    @classmethod
    def coerce(cls, value: Any) -> Any:
        if value is None:
            return cls(max_attempts=1)
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(max_attempts=value)
        return super().coerce(value)


def _is_exc_type(x: object) -> bool:
    return isinstance(x, type) and issubclass(x, BaseException)


class Hedge(Options):
    """Hedged reads (`pipeline.hedge`), for idempotent tools: when an attempt has not
    answered after `delay`, one more attempt of the same call starts beside it, and the
    first good answer wins (the others are cancelled, or, for a sync tool, abandoned and
    counted like a timed-out attempt). On a tool that is not idempotent it is ignored
    (logged once): a write is never sent twice. Not for services billed per call, nor
    for ones that are slow for everyone. Shorthands: ``hedge="auto"``, ``hedge=0.2``."""

    delay: float | Literal["auto"] = "auto"
    """Seconds an attempt may be with its tool before a hedge starts beside it (the wait
    for a thread, a slot or a token does not count). ``"auto"``: 1.25 times the tool's
    own recent p95 service time, at most twice its p75 (stalls do not move it), never
    below `min_delay`; no hedge until 10 latencies are known."""
    max_hedges: int = Field(default=1, ge=1, le=4)
    """Hedges one attempt may get, one more each time the `delay` passes again."""
    budget: float = Field(default=0.05, ge=0, le=1)
    """Share of the tool's calls that may be hedged, so a service that is slow for
    everyone is not hit twice as hard: each call adds this much of a token to a bucket
    that starts empty, each hedge sent takes a whole one (also one cancelled before it
    reached the tool). From the first call on, hedges stay within this share of the
    calls, bursts included. Hedges also take from the retry budget
    (`RetryPolicy.budget`) of a tool that retries."""
    burst: int = Field(default=10, ge=1)
    """Tokens the budget's bucket holds at most: a tool healthy for a while (``burst /
    budget`` calls, 200 by default) may have this many stalls in a row all hedged. The
    burst is saved up by earlier calls, never lent in advance, so it is counted inside
    `budget`."""
    min_delay: float = Field(default=0.05, gt=0)
    """With ``delay="auto"``: the shortest hedge delay, in seconds (until the tool's
    latencies are known, it is not hedged at all)."""

    def __repr_args__(self) -> Any:  # the delay always: ``Hedge()`` would not say it hedges
        yield "delay", self.delay
        yield from ((k, v) for k, v in super().__repr_args__() if k != "delay")

    @field_validator("delay", mode="before")
    @classmethod
    def _check_delay(cls, v: Any) -> Any:
        if isinstance(v, bool) or (isinstance(v, int | float) and v <= 0):
            raise UsageError('Hedge.delay must be a delay > 0 in seconds or "auto"')
        return v

    @classmethod
    def coerce(cls, value: Any) -> Any:
        if isinstance(value, str) or (
            isinstance(value, int | float) and not isinstance(value, bool)
        ):
            return cls.model_validate({"delay": value})
        if isinstance(value, bool):
            raise UsageError('hedge must be a delay > 0 in seconds, "auto", a Hedge or None')
        return super().coerce(value)


class BreakerPolicy(Options):
    """When a tool's circuit breaker opens and how it recovers (`pipeline.breaker`)."""

    failure_threshold: int = Field(default=5, ge=1)
    """Consecutive failed attempts that open the circuit."""
    recovery_time: float = Field(default=30.0, gt=0)
    """Seconds the circuit stays open before one probe call is let through."""
    failure_rate: float | None = Field(default=None, gt=0, le=1)
    """Also open when this share of the calls in the last `window` seconds failed (once
    at least `min_calls` were made); `None` uses the consecutive count only."""
    window: float = Field(default=60.0, gt=0)
    """Seconds of history the failure rate is computed over (in ten slices: a call may
    be forgotten up to a tenth of the window early)."""
    min_calls: int = Field(default=10, ge=1)
    """Calls needed in the window before the failure rate can open the circuit."""
    slow_call_s: float | None = Field(default=None, gt=0)
    """A successful attempt slower than this counts as a failure (the result is kept)."""
    count_low_quality: bool = False
    """Count results flagged by the result checks (`ResultChecks`) as failures."""
    on_state_change: Callable[[str, str, str], None] | None = None
    """Called as ``(tool, old_state, new_state)`` on every transition; states are
    ``"closed"``, ``"open"`` and ``"half_open"``. Errors it raises are logged, not raised."""


class AdaptiveTimeout(Options):
    """A per-tool timeout derived from the tool's own latency history
    (``timeouts=Timeouts(adaptive=AdaptiveTimeout())``)."""

    percentile: float = Field(default=0.99, gt=0, le=1)
    """Which latency of the recent successful attempts to start from (0.99 = p99)."""
    factor: float = Field(default=2.0, ge=1)
    """The timeout is the percentile times this factor ..."""
    min_timeout: float = Field(default=0.05, gt=0)
    """... but never below this many seconds ..."""
    max_timeout: float = Field(default=60.0, gt=0)
    """... nor above this many."""
    window: int = Field(default=100, ge=1)
    """How many recent latencies are kept."""
    min_samples: int = Field(default=10, ge=1)
    """Until this many latencies are known, the configured `timeout` is used."""

    @model_validator(mode="after")
    def _check(self) -> AdaptiveTimeout:
        if self.max_timeout < self.min_timeout:
            raise UsageError("AdaptiveTimeout.max_timeout must be >= min_timeout")
        if self.min_samples > self.window:
            raise UsageError("AdaptiveTimeout.min_samples must be <= window")
        return self
