"""Running sync work on persistent worker threads, with deadlines that hold.

`WorkerPool` is a small lazily-growing pool of *daemon* threads. It exists instead of
`concurrent.futures.ThreadPoolExecutor` for one reason: the standard pool joins its
threads when the interpreter exits, so a single hung tool would keep the process alive
forever. Threads are started on demand, reused, and retire after `idle_s` idle seconds.

`TimedRunner` runs one attempt of a sync tool with a deadline. Python cannot kill a
thread: when a deadline passes, the caller gets control back at once and the thread is
*abandoned* (left to finish, counted per tool). Once a tool holds
`max_abandoned` such threads, its new calls fail fast (`ThreadsExhausted`) instead of
queueing behind hung ones, so one hung tool cannot take every worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import types
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from ..core.errors import AttemptTimeout, ThreadsExhausted
from .alarms import alarms_for
from .drive import drive
from .inbox import Inbox, inbox_for
from .job import Job

T = TypeVar("T")


class WorkerPool:
    """Lazily started, reused daemon threads; at most `max_workers` at once."""

    def __init__(self, max_workers: int, *, name: str, idle_s: float = 60.0) -> None:
        self.max_workers = max_workers
        self._name = name
        self._idle_s = idle_s
        self._queue: queue.SimpleQueue[Job[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._waiting = 0

    def submit(self, fn: Callable[[], T]) -> Job[T]:
        job = Job(fn)
        with self._lock:
            # An idle worker takes one queued item: start a thread whenever the items
            # waiting outnumber the idle workers (a worker woken for an earlier item is
            # still counted idle until it takes it, so `idle == 0` alone is not enough).
            self._waiting += 1
            spawn = self._waiting > self._idle and self._threads < self.max_workers
            if spawn:
                self._threads += 1
                n = self._threads
        self._queue.put(job)
        if spawn:
            threading.Thread(target=self._work, name=f"{self._name}-{n}", daemon=True).start()
        return job

    @property
    def threads(self) -> int:
        return self._threads

    def _work(self) -> None:
        self._ready()
        while True:
            try:
                job = self._queue.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    self._threads -= 1
                return
            with self._lock:
                self._idle -= 1
                self._waiting -= 1
            job.run(self._ready)  # counted idle again before its caller wakes
            del job  # not kept alive by an idle worker

    def _ready(self) -> None:
        with self._lock:
            self._idle += 1


class TimedRunner:
    """Runs attempts with a deadline on a `WorkerPool`, counting abandoned threads per key."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        self._abandoned: dict[str, int] = {}
        self._scope = ""

    def scoped(self) -> TimedRunner:
        """A runner on the same pool and counts whose keys are its own.

        Each adapter gets one, so the abandoned threads of one wrapper's tool do not count
        against another wrapper of the same tool (`max_abandoned_threads` is a policy of
        the adapter); `abandoned()` on this runner still sums every scope.
        """
        view = TimedRunner(self.pool)
        view._lock, view._abandoned = self._lock, self._abandoned
        view._scope = f"{id(view):x}/"
        return view

    def abandoned(self, key: str | None = None) -> int:
        """Threads still running after their deadline passed (for `key` in this runner's
        scope, or in all scopes)."""
        with self._lock:
            if key is None:
                return sum(self._abandoned.values())
            return self._abandoned.get(self._scope + key, 0)

    def _admit(self, key: str, max_abandoned: int) -> None:
        n = self._abandoned.get(self._scope + key, 0)  # one read: no lock needed
        if n >= max_abandoned:
            raise ThreadsExhausted(n)

    def _abandon(self, key: str, fut: Job[Any]) -> None:
        key = self._scope + key
        with self._lock:
            self._abandoned[key] = self._abandoned.get(key, 0) + 1

        def release(_: Job[Any]) -> None:
            with self._lock:
                left = self._abandoned.get(key, 1) - 1
                if left:
                    self._abandoned[key] = left
                else:
                    self._abandoned.pop(key, None)

        fut.add_done_callback(release)

    def _submit(self, fn: Callable[[], T]) -> Job[T]:
        return self.pool.submit(partial(contextvars.copy_context().run, fn))

    def run(self, key: str, fn: Callable[[], T], timeout: float, max_abandoned: int) -> T:
        """Run `fn` on a worker; raise `AttemptTimeout` at the deadline."""
        self._admit(key, max_abandoned)
        fut = self._submit(fn)
        try:
            if fut.wait(timeout) or fut.done():  # done: finished at the deadline
                return fut.result()
            if fut.cancel():
                raise AttemptTimeout(timeout, started=False)
            self._abandon(key, fut)
            raise AttemptTimeout(timeout, late=fut)
        finally:
            del fut  # it holds the tool's error, whose traceback holds this frame

    async def arun(
        self,
        key: str,
        fn: Callable[[], T],
        timeout: float | None,
        max_abandoned: int,
        on_job: Callable[[Job[T]], Any] | None = None,
    ) -> T:
        """Run sync `fn` on a worker without blocking the event loop; `on_job` is told
        the job once submitted.

        The worker hands its result to the loop through the loop's `Inbox` (no
        ``wrap_future`` plus ``asyncio.wait``: each of their loop turns costs as much
        as a fast tool; and one wake-up of the loop for all the results that arrive
        together).
        """
        self._admit(key, max_abandoned)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()
        fut = self._submit(fn)
        if on_job is not None:
            on_job(fut)
        fut.add_done_callback(partial(_to_loop, inbox_for(loop), answer))
        alarms = alarm = None
        if timeout is not None:
            alarms = alarms_for(loop)
            alarm = alarms.at(loop.time() + timeout, partial(_expire_sync, answer, timeout))
        try:
            return await answer
        except AttemptTimeout as exc:
            if fut.cancel():
                raise AttemptTimeout(timeout or 0.0, started=False) from None
            if fut.done():  # finished right at the deadline
                return fut.result()
            self._abandon(key, fut)
            exc.late = fut
            raise
        except asyncio.CancelledError:
            # Not started yet: it never will. Running: it runs out alone, counted like
            # a thread left behind at a deadline (the caller's deadline may be what
            # cancelled it: `OffloadedTool` has none of its own).
            if not fut.cancel() and not fut.done():
                self._abandon(key, fut)
            raise
        finally:
            if alarms is not None and alarm is not None:
                alarms.cancel(alarm)
            del fut, answer  # they hold the tool's error, whose traceback holds this frame


def _to_loop(inbox: Inbox, answer: asyncio.Future[Any], fut: Job[Any]) -> None:
    """On the worker: pass `fut`'s outcome to `answer` on its loop."""
    if not fut.cancelled():
        inbox.post(_settle_from, answer, fut)


def _settle_from(answer: asyncio.Future[Any], fut: Job[Any]) -> None:
    if answer.done():
        return
    exc = fut.exception()
    if exc is not None:
        answer.set_exception(exc)
    else:
        answer.set_result(fut.result())


def _expire_sync(answer: asyncio.Future[Any], timeout: float) -> None:
    if not answer.done():
        answer.set_exception(AttemptTimeout(timeout))


async def await_with_timeout(make: Callable[[], Awaitable[T]], timeout: float | None) -> T:
    """Await `make()` with a deadline that holds even if the coroutine ignores cancellation.

    A coroutine is driven from the caller's own task (`runtime.drive`): no task of its
    own, and no loop turn but the ones the tool itself waits for (a loop turn is most of
    the price of a fast async tool). At the deadline what it waits for is cancelled, so
    that cancellation reaches the tool, and control returns at once without waiting for
    the tool to acknowledge it. Any other awaitable runs as a task of its own.
    """
    if timeout is None:
        return await make()
    return await timed(make(), timeout)


def timed(awaitable: Awaitable[T], timeout: float) -> Awaitable[T]:
    """`awaitable` (not awaited yet) with the deadline `await_with_timeout` gives it."""
    if isinstance(awaitable, types.CoroutineType):
        return drive(awaitable, timeout)
    return drive(_await(awaitable), timeout)


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


_default_runner: TimedRunner | None = None
_default_lock = threading.Lock()


def default_runner() -> TimedRunner:
    """The process-wide runner for sync attempts (32 workers)."""
    global _default_runner
    if _default_runner is None:
        with _default_lock:
            if _default_runner is None:
                _default_runner = TimedRunner(WorkerPool(32, name="lrt-tool"))
    return _default_runner


_dispatch_pool: WorkerPool | None = None


def dispatch_pool() -> WorkerPool:
    """The process-wide pool that drives parallel calls of one sync node step."""
    global _dispatch_pool
    if _dispatch_pool is None:
        with _default_lock:
            if _dispatch_pool is None:
                _dispatch_pool = WorkerPool(256, name="lrt-dispatch")
    return _dispatch_pool
