"""Idempotency-aware retry with exponential backoff and jitter, on tenacity.

Only calls that are safe to repeat are retried (`Call.idempotent`). What is worth a
retry is decided by `should_retry`; the waits go through the testing-aware sleeps, so
the async driver never blocks the loop and testing mode makes them instant.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)
from tenacity.wait import wait_base

from .. import _testing
from .._call import Call
from .._classify import is_transient
from .._errors import AttemptTimeout, LowQualityResult, ToolRaised
from .._policy import RetryPolicy
from . import AsyncNext, Next, Stage


def should_retry(call: Call, exc: BaseException) -> bool:
    """Whether another attempt of `call` is worth making after `exc`."""
    if isinstance(exc, AttemptTimeout):
        return True
    if isinstance(exc, LowQualityResult):
        return call.resolved.policy.on_low_quality == "retry"
    if not isinstance(exc, ToolRaised):
        return False  # our own verdicts (open circuit, bad arguments, ...) are final
    original = exc.original
    retry_on = call.resolved.policy.retry.retry_on
    if retry_on is None:
        return is_transient(original)
    if isinstance(retry_on, (type, tuple)):
        return isinstance(original, retry_on)
    return bool(retry_on(original))


def backoff(policy: RetryPolicy) -> wait_base:
    """The wait strategy: initial_delay * multiplier**(n-1), capped, plus random jitter."""
    wait: wait_base = wait_exponential(
        multiplier=policy.initial_delay,
        exp_base=policy.multiplier,
        min=0,
        max=policy.max_delay,
    )
    if policy.jitter:
        wait = wait + wait_random(0, policy.jitter)
    return wait


def _retries(call: Call) -> bool:
    return call.idempotent and call.resolved.policy.retry.max_attempts > 1


class RetryStage(Stage):
    name = "retry"

    def wrap(self, call: Call, call_next: Next) -> Any:
        if not _retries(call):
            return call_next(call)
        policy = call.resolved.policy.retry
        retrying = Retrying(
            stop=stop_after_attempt(policy.max_attempts),
            wait=backoff(policy),
            retry=retry_if_exception(partial(should_retry, call)),
            sleep=_testing.sleep,
            reraise=True,
        )
        return retrying(call_next, call)

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        if not _retries(call):
            return await call_next(call)
        policy = call.resolved.policy.retry
        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.max_attempts),
            wait=backoff(policy),
            retry=retry_if_exception(partial(should_retry, call)),
            sleep=_testing.asleep,
            reraise=True,
        )
        return await retrying(call_next, call)
