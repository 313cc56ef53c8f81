"""Idempotency-aware retry with exponential backoff and jitter, on tenacity.

Only calls that are safe to repeat are retried (`Call.idempotent`), and calls whose
failure says they were not carried out (`core.hints.not_carried_out`: never sent, or
refused by the service with a 429 or a 503 and ``Retry-After``), after at least the
wait the service asked for. What is worth a
retry is decided by `should_retry`; the waits go through the testing-aware sleeps, so
the async driver never blocks the loop and testing mode makes them instant.

Two limits sit on top of the attempt count: the call's deadline (`runtime.deadline`) caps
every wait and stops retrying when nothing is left, and the tool's retry budget
(`pipeline.retry.budget.RetryAllowance`) refuses retries beyond a share of recent calls.

Once the run is asked to drain (`runtime.drain`), no retry starts: a failure that would
have been retried is answered as `Drained` (it, and that it was not tried again), and a
backoff wait under way ends at once.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    wait_exponential,
    wait_random,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from ...core.call import Call
from ...core.errors import AttemptTimeout, Drained, LowQualityResult, ToolRaised
from ...core.hints import not_carried_out, retry_after
from ...core.policy import ResolvedPolicy, RetryPolicy
from ...runtime import deadline as _deadline
from ...runtime import drain as _drain
from ...state.pertool import PerTool
from ..health import retry_wants
from ..stage import AsyncNext, Env, Next, Stage
from .budget import RetryAllowance
from .replay import GAVE_UP, AsyncReplay, Failures, Replay


def should_retry(call: Call, exc: BaseException) -> bool:
    """Whether another attempt of `call` is worth making after `exc`.

    A call that is not safe to repeat is retried only when its failure says it was not
    carried out (never sent, or refused before the service acted: `_refused`) and
    `RetryPolicy.retry_refused_writes` is on.
    """
    if not call.idempotent:
        return call.resolved.policy.retry.retry_refused_writes and _refused(exc) is not None
    if isinstance(exc, AttemptTimeout):
        return True
    if isinstance(exc, LowQualityResult):
        return call.resolved.policy.results.on_low_quality == "retry"
    # Our own verdicts (open circuit, bad arguments, ...) are final.
    return isinstance(exc, ToolRaised) and retry_wants(exc.original, call)


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


def _refused(exc: BaseException | None) -> float | None:
    """For a failure that was not carried out (`not_carried_out`), the wait it asks for (0
    without a hint); else `None`."""
    if isinstance(exc, ToolRaised) and not_carried_out(exc.original):
        return retry_after(exc.original) or 0.0
    return None


def _hint(state: RetryCallState) -> float:
    """The wait the last failure of `state` asked for (a rate limit's retry hint), or 0."""
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None and outcome.failed else None
    return _refused(exc) or 0.0


def _hint_too_long(call: Call, state: RetryCallState) -> bool:
    """Whether the hinted wait does not fit before the deadline (or, without a deadline,
    exceeds `RetryPolicy.max_delay`): then the call is answered at once."""
    hint = _hint(state)
    if not hint:
        return False
    left = _deadline.remaining(call)
    return hint > call.resolved.policy.retry.max_delay if left is None else hint >= left


class _DeadlineWait(wait_base):
    """A wait strategy: at least a rate limit's hint, capped to what is left of the
    call's deadline."""

    def __init__(self, inner: wait_base, call: Call) -> None:
        self.inner, self.call = inner, call

    def __call__(self, retry_state: RetryCallState) -> float:
        wait = max(self.inner(retry_state), _hint(retry_state))
        return _deadline.cap_wait(self.call, wait)


_LEFT_FOR_ATTEMPT = 0.1
"""What a retry's attempt must still have after its backoff: a tenth of its own timeout,
or of what is left of the deadline when that is shorter; a wait that would leave less is
not waited out."""


class _DeadlineStop(stop_base):
    """Stop once the call's deadline has passed, or when the backoff before the next
    attempt (tenacity computes it before asking) would leave that attempt too little
    time (`_LEFT_FOR_ATTEMPT`): the call is answered now with its last real failure,
    rather than after the wait with a ``timeout`` of an attempt that had no time to run."""

    def __init__(self, call: Call) -> None:
        self.call = call

    def __call__(self, retry_state: RetryCallState) -> bool:
        left = _deadline.remaining(self.call)
        if left is None:
            return False
        if left <= 0:
            return True
        timeout = self.call.resolved.policy.timeout
        unit = left if timeout is None else min(left, timeout)
        if left - retry_state.upcoming_sleep < unit * _LEFT_FOR_ATTEMPT:
            _deadline.give_up(self.call)
            return True
        return False


class _BudgetStop(stop_base):
    """Stop when the tool's retry budget refuses the retry: asked last, so only a retry
    that would otherwise happen takes from the budget."""

    def __init__(self, budget: RetryAllowance) -> None:
        self.budget = budget

    def __call__(self, retry_state: RetryCallState) -> bool:
        return not self.budget.try_spend()


def _deadline_passed(call: Call) -> bool:
    left = _deadline.remaining(call)
    return left is not None and left <= 0


def _retries(call: Call) -> bool:
    resolved = call.resolved
    return resolved.max_attempts > 1 and (
        call.idempotent or resolved.policy.retry.retry_refused_writes
    )


class RetryStage(Stage):
    name = "retry"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.budgets: PerTool[RetryAllowance] = PerTool()
        env.retry_budget = self.budget_for  # published (hedges spend from it too)

    def applies(self, resolved: ResolvedPolicy) -> bool:
        """Only a tool whose calls may be retried (decided per tool: `_retries`)."""
        return resolved.max_attempts > 1 and (
            resolved.idempotent or resolved.policy.retry.retry_refused_writes
        )

    def budget_for(self, call: Call) -> RetryAllowance | None:
        """The retry budget of `call`'s tool (made on first use), or `None` when the tool
        is not retried or its policy has no budget."""
        spec = call.resolved.retry_budget
        if spec is None or not _retries(call):
            return None
        return self.budgets.get(
            call.name,
            lambda: RetryAllowance(
                ratio=spec.ratio, minimum=spec.min, window=spec.window, clock=call.resolved.clock
            ),
        )

    def _record(self, call: Call) -> RetryAllowance | None:
        """Count `call` in its tool's retry budget (if any); return the budget."""
        if call.resolved.retry_budget is None:
            return None
        budget = self.budgets.peek(call.name) or self.budget_for(call)
        if budget is not None:
            budget.record_call()
        return budget

    def _options(
        self, call: Call, budget: RetryAllowance | None, drained: list[bool], failures: Failures
    ) -> dict[str, Any]:
        policy = call.resolved.policy.retry

        def retry(exc: BaseException) -> bool:
            return should_retry(call, exc)

        def allowed(state: RetryCallState) -> bool:
            # Asked only after `retry` said yes. The attempt and deadline checks repeat
            # the first two stops on purpose: a drain is blamed (`drained`) only for a
            # retry that would otherwise have started.
            if state.attempt_number >= policy.max_attempts or _deadline_passed(call):
                return False
            if _hint_too_long(call, state):
                return False
            if _drain.draining(call):  # the run is stopping: no retry starts
                drained.append(True)
                return False
            return True

        stops = [stop_after_attempt(policy.max_attempts), _DeadlineStop(call)]
        if budget is not None:
            stops.append(_BudgetStop(budget))  # last: `stop_any` asks in order
        return {
            "stop": stop_any(*stops),
            "wait": _DeadlineWait(backoff(policy), call),
            "retry": retry_if_exception(retry) & allowed,
            "before": failures.seen,
            "retry_error_callback": failures.gave_up,
        }

    # The first attempt runs without tenacity (most calls succeed at once, and building
    # and driving a Retrying costs ~50 us); a failure is handed to tenacity as its own
    # first attempt, so every retry decision, wait and stop is exactly tenacity's.

    def wrap(self, call: Call, call_next: Next) -> Any:
        budget = self._record(call)
        try:
            return call_next(call)
        except Exception as exc:
            replay = Replay(exc, call_next)
        drained: list[bool] = []
        sleep = partial(_drain.sleep, call)
        retrying = Retrying(sleep=sleep, **self._options(call, budget, drained, replay))
        try:
            value: Any = retrying(replay, call)
            if value is GAVE_UP:
                replay.raise_last()
            return value
        except Exception as exc:
            _not_retried(call, exc, drained)
            raise
        finally:
            replay.forget(retrying)

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        budget = self._record(call)
        try:
            return await call_next(call)
        except Exception as exc:
            replay = AsyncReplay(exc, call_next)
        drained: list[bool] = []
        sleep = partial(_drain.asleep, call)
        retrying = AsyncRetrying(sleep=sleep, **self._options(call, budget, drained, replay))
        try:
            value: Any = await retrying(replay, call)
            if value is GAVE_UP:
                replay.raise_last()
            return value
        except Exception as exc:
            _not_retried(call, exc, drained)
            raise
        finally:
            replay.forget(retrying)


def _not_retried(call: Call, exc: Exception, drained: list[bool]) -> None:
    """A failure that was not retried because the run is draining is answered so."""
    if drained and not isinstance(exc, Drained):
        _drain.refuse(call, "retry", after=exc)
