"""`Job`: one piece of work for a `WorkerPool`, and its one-shot result.

It stands in for `concurrent.futures.Future` on the hot path of every sync tool call.
The standard future builds a `threading.Condition` per instance and runs Python code
in it at every change of state (start, result, wait); a job is three C locks and a few
fields, which halves the cost of handing a call to a worker thread and back.

Only what the pool and its callers use is here: cancel before start, wait with a
timeout, result or exception, done callbacks.
"""

from __future__ import annotations

import _thread
import logging
from collections.abc import Callable
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any, Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class Job(Generic[T]):
    """`fn` to run once on a worker; waited on by the caller."""

    __slots__ = (
        "_callbacks",
        "_cancelled",
        "_claim",
        "_done",
        "_error",
        "_finished",
        "_fn",
        "_lock",
        "_value",
    )

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._claim = _thread.allocate_lock()
        """Taken by whoever comes first: the worker that starts the job, or `cancel`."""
        self._done = _thread.allocate_lock()
        self._done.acquire()  # released when the job is finished
        self._lock = _thread.allocate_lock()  # guards `_callbacks` against `_finish`
        self._finished = False
        self._cancelled = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Job[T]], Any]] = []

    # -- the worker's side ----------------------------------------------------------

    def run(self, ready: Callable[[], Any] | None = None) -> None:
        """Run the job (on a worker), unless it was cancelled first.

        `ready` is called once the work is done and before the caller is woken (the pool
        counts its worker idle there, so a caller that submits again at once does not
        find the pool's lock taken by the worker it just heard from).
        """
        if self._claim.acquire(False):
            try:
                self._value = self._fn()
            except BaseException as exc:  # handed to the caller
                self._error = exc
            if ready is not None:
                ready()
            self._finish()
            del self  # an error's traceback holds this frame: it must not hold the job
        elif ready is not None:
            ready()

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
            callbacks, self._callbacks = self._callbacks, []
        self._done.release()
        for callback in callbacks:
            try:
                callback(self)
            except Exception:  # as concurrent.futures does: log, and go on
                log.exception("a job's done callback failed")

    # -- the caller's side ----------------------------------------------------------

    def cancel(self) -> bool:
        """Cancel the job if no worker has started it; whether it is cancelled."""
        if not self._claim.acquire(False):
            return self._cancelled
        self._cancelled = True
        self._error = CancelledError()
        self._finish()
        return True

    def cancelled(self) -> bool:
        return self._cancelled

    def done(self) -> bool:
        return self._finished

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job is finished (at most `timeout` seconds); whether it is."""
        if self._finished:
            return True
        if not self._done.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            return False
        self._done.release()  # let any other waiter through too
        return True

    def result(self, timeout: float | None = None) -> T:
        """The job's value; raises its exception, or `TimeoutError` after `timeout`."""
        if not self.wait(timeout):
            raise FuturesTimeout()
        if self._error is not None:
            try:
                raise self._error
            finally:
                del self  # the error's traceback holds this frame: no cycle through it
        value: T = self._value
        return value

    def exception(self) -> BaseException | None:
        """The finished job's exception, if it raised (call once it is done)."""
        return self._error

    def add_done_callback(self, fn: Callable[[Job[T]], Any]) -> None:
        """Call `fn(job)` once the job is finished (at once if it already is)."""
        with self._lock:
            if not self._finished:
                self._callbacks.append(fn)
                return
        fn(self)
