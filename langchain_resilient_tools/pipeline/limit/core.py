"""The core of the limits stage: what one attempt waits for, decided without I/O.

`Queue.steps` yields what the drivers must do (`Step`): a pause of so many seconds, or
a store operation of the attempt's shared limits (`shared.SharedLimit`), whose result
the driver sends back (a `BackendError` it throws back in). The decisions are here
once; the sync and the async driver only carry them out.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from langchain_core.rate_limiters import BaseRateLimiter, InMemoryRateLimiter

from ...core.call import Call
from ...core.errors import AttemptTimeout, BackendError
from ...runtime import deadline as _deadline
from ...runtime.slots import Slots
from ..shared import fail
from .shared import SharedLimit

POLL_S = 0.05
"""How often a caller looks for a token of a limiter that is not an `InMemoryRateLimiter`."""
LEASE_POLL_S = (0.01, 0.2)
"""A caller waiting for a shared slot asks the store again after the first of these,
then twice as long each time, up to the second (seconds)."""

Step = float | Callable[[], Any]
"""What the core asks of a driver: pause for so many seconds, or run this store
operation and send its result back."""
Steps = Generator[Step, Any, None]


def make_limiter(calls_per_second: float, burst: int = 1) -> InMemoryRateLimiter:
    """The limiter behind ``rate_limit=<calls per second>`` in one process: `burst`
    tokens at most, polled often enough (a tenth of the interval between calls) to hold
    the rate within a few %."""
    return InMemoryRateLimiter(
        requests_per_second=calls_per_second,
        check_every_n_seconds=min(0.1, 0.1 / calls_per_second),
        max_bucket_size=burst,
    )


def _poll_every(limiter: BaseRateLimiter) -> float:
    step = getattr(limiter, "check_every_n_seconds", POLL_S)
    return step if isinstance(step, int | float) and step > 0 else POLL_S


class Queue:
    """One attempt's way to the tool through its limits: decided here, carried out by
    the drivers (`stage.LimitStage.wrap`, `stage.LimitStage.awrap`)."""

    __slots__ = ("call", "limiter", "shared", "slots", "started", "step")

    def __init__(
        self,
        call: Call,
        slots: Slots | None,
        limiter: BaseRateLimiter | None,
        shared: SharedLimit | None = None,
    ) -> None:
        self.call = call
        self.slots = slots
        """The tool's slots in this adapter (`Limits.max_concurrency`), if it has any."""
        self.limiter = limiter
        """The tool's rate limiter in this process (`Limits.rate_limit`), if it has one:
        used when there is no shared rate, or the store failed (``on_error="open"``)."""
        self.shared = shared
        """The attempt's limits in the shared store, when its state is shared there."""
        self.started = call.resolved.policy.clock()
        self.step = POLL_S if limiter is None else _poll_every(limiter)

    def slot_wait(self) -> float | None:
        """How long the attempt may wait for a slot: what is left of its deadline (`None`:
        no deadline); none for a hedge."""
        return 0.0 if self.call.hedge else _deadline.remaining_or_none(self.call)

    def out_of_time(self) -> AttemptTimeout:
        """The attempt's failure when it got no slot or token in time (never started)."""
        waited = self.call.resolved.policy.clock() - self.started
        return AttemptTimeout(round(waited, 3), started=False)

    def _cut(self, seconds: float) -> float:
        """A pause of `seconds` cut to what is left of the deadline; raises `out_of_time`
        for a hedge (it never waits) or when nothing is left."""
        if self.call.hedge:
            raise self.out_of_time()
        left = _deadline.remaining(self.call)
        if left is not None and left <= 0:
            raise self.out_of_time()
        return float(seconds if left is None else min(seconds, left))

    def pause(self) -> float | None:
        """`None` when a token of the local limiter was taken (or there is none); else
        how long to pause before asking again: a polling step, cut to what is left of
        the call's deadline. Raises `out_of_time` when none is left (a hedge does not
        wait at all)."""
        limiter = self.limiter
        if limiter is None or limiter.acquire(blocking=False):
            return None
        return self._cut(self.step)

    def steps(self) -> Steps:
        """Everything the attempt waits for after its local slot: its shared lease, then
        its token (shared, or else of the local limiter)."""
        shared = self.shared
        if shared is not None and shared.cap is not None:
            yield from self._lease(shared)
        if shared is not None and shared.rate is not None and (yield from self._token(shared)):
            return
        while (pause := self.pause()) is not None:
            yield pause

    def _lease(self, shared: SharedLimit) -> Steps:
        """A lease on a shared slot, asked for again (polling, with backoff) while all are
        held. A store failure: `Shared.on_error` (``"open"``: the local slot held already
        is the limit; ``"closed"``: the call is refused)."""
        poll = LEASE_POLL_S[0]
        while True:
            try:
                if (yield shared.acquire):
                    return
            except BackendError as exc:
                fail(self.call, exc, "shared max_concurrency")
                return
            yield self._cut(poll)
            poll = min(2 * poll, LEASE_POLL_S[1])

    def _token(self, shared: SharedLimit) -> Generator[Step, Any, bool]:
        """A token of the shared bucket (`True`); `False` when the store failed and the
        policy fails open: the local limiter decides. The bucket says when its next token
        is due: a call whose deadline comes first is answered at once."""
        while True:
            try:
                wait = yield shared.take
            except BackendError as exc:
                fail(self.call, exc, "shared rate_limit")
                return False
            if wait <= 0:
                return True
            left = _deadline.remaining(self.call)
            if left is not None and wait > left:
                raise self.out_of_time()
            yield self._cut(wait)

    def admitted(self) -> None:
        """The attempt goes on: the time it waited is kept in its record (``queued_ms``)."""
        self.call.record.queued_ms += (self.call.resolved.policy.clock() - self.started) * 1000

    @property
    def leased(self) -> bool:
        """Whether the attempt holds a shared lease (its release is a store operation)."""
        return self.shared is not None and self.shared.held

    def release(self) -> None:
        """Give the shared lease back, if one is held (the local slot is the driver's)."""
        if self.shared is not None:
            self.shared.release()
