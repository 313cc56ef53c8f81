"""The attempts `RetryStage` hands to tenacity, and what they leave behind.

The first attempt runs before tenacity; its failure is replayed as tenacity's first
attempt (`Replay.__call__`). Once tenacity is done, `forget` drops what still names a
failure: tenacity's state of the call, our own last failure, tenacity's list of the
steps it took. A failure's traceback holds the frames it passed through and, by
``f_back``, their callers as they were when they returned (tenacity's loop among them),
so any of those that still named the failure would keep it, its call and all those
frames in a cycle that only the garbage collector frees.
"""

from __future__ import annotations

from typing import Any, NoReturn

from tenacity import BaseRetrying, RetryCallState

from ...core.call import Call
from ...runtime import drain as _drain
from ..stage import AsyncNext, Next

GAVE_UP = object()
"""What tenacity returns once it stops retrying (`Failures.gave_up`): the stage raises
the last failure itself (`Failures.raise_last`), so that no frame of tenacity's keeps it
(as its ``reraise`` would: its `RetryError` holds the failure in the frames it raises from)."""


class Failures:
    """The failures of one call's attempts under tenacity, dropped by `forget`."""

    __slots__ = ("last", "pending", "state")

    def __init__(self, first: Exception) -> None:
        self.pending: Exception | None = first
        """The first attempt's failure, until tenacity's first attempt replays it."""
        self.last: Exception | None = first
        """The last failure (what a retry refused by a drain reports)."""
        self.state: RetryCallState | None = None

    def seen(self, state: RetryCallState) -> None:
        """tenacity's ``before`` hook: the state of the call, to clear in `forget`."""
        self.state = state

    def gave_up(self, state: RetryCallState) -> object:
        """tenacity's ``retry_error_callback``: no more attempts."""
        return GAVE_UP

    def raise_last(self) -> NoReturn:
        """Raise the failure of the last attempt (tenacity gave up on it)."""
        assert self.state is not None and self.state.outcome is not None
        error = self.state.outcome.exception()
        assert error is not None, "tenacity retries failures only"
        try:
            raise error
        finally:
            del error  # its traceback holds this frame

    def _take(self) -> Exception:
        first, self.pending = self.pending, None
        assert first is not None
        return first

    def forget(self, retrying: BaseRetrying) -> None:
        """Drop every reference to a failure left by the call (and tenacity's cycle)."""
        self.pending = self.last = None
        if self.state is not None:
            self.state.outcome = None
            self.state = None
        retrying.iter_state.reset()  # its steps are bound methods of `retrying`: a cycle


class Replay(Failures):
    """`call_next` for tenacity: its first use re-raises the first attempt's failure (the
    attempt already made), and no later attempt starts once the run is draining (a
    backoff wait ended early: `Drained`, with the last failure)."""

    __slots__ = ("call_next",)

    def __init__(self, first: Exception, call_next: Next) -> None:
        super().__init__(first)
        self.call_next = call_next

    def __call__(self, call: Call) -> Any:
        if self.pending is not None:
            raise self._take()
        if _drain.draining(call):
            _drain.refuse(call, "retry", after=self.last)
        try:
            return self.call_next(call)
        except Exception as exc:
            self.last = exc
            raise


class AsyncReplay(Failures):
    """Async `Replay`."""

    __slots__ = ("call_next",)

    def __init__(self, first: Exception, call_next: AsyncNext) -> None:
        super().__init__(first)
        self.call_next = call_next

    async def __call__(self, call: Call) -> Any:
        if self.pending is not None:
            raise self._take()
        if _drain.draining(call):
            _drain.refuse(call, "retry", after=self.last)
        try:
            return await self.call_next(call)
        except Exception as exc:
            self.last = exc
            raise
