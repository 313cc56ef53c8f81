"""Worker threads: deadlines hold, abandoned threads are counted and bounded."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

import pytest

from langchain_resilient_tools.core.errors import AttemptTimeout, ThreadsExhausted
from langchain_resilient_tools.runtime.executor import TimedRunner, WorkerPool, await_with_timeout

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


@pytest.fixture
def release() -> object:
    event = threading.Event()
    yield event
    event.set()


def test_result_and_exception_pass_through() -> None:
    runner = TimedRunner(WorkerPool(2, name="t"))
    assert runner.run("k", lambda: 42, 1.0, 2) == 42
    with pytest.raises(KeyError):
        runner.run("k", lambda: {}["x"], 1.0, 2)


def test_a_tool_raising_timeout_error_is_not_a_deadline() -> None:
    runner = TimedRunner(WorkerPool(2, name="t"))

    def raises() -> None:
        raise TimeoutError("the tool's own")

    with pytest.raises(TimeoutError, match="the tool's own"):
        runner.run("k", raises, 1.0, 2)


def test_context_variables_reach_the_worker() -> None:
    runner = TimedRunner(WorkerPool(2, name="t"))
    VAR.set("caller")
    assert runner.run("k", VAR.get, 1.0, 2) == "caller"


def test_scoped_runners_count_apart_on_one_pool(release: threading.Event) -> None:
    base = TimedRunner(WorkerPool(8, name="t"))
    first, second = base.scoped(), base.scoped()
    assert first.pool is second.pool is base.pool
    with pytest.raises(AttemptTimeout):
        first.run("hung", lambda: release.wait(30), 0.05, 1)
    assert first.abandoned("hung") == 1 and second.abandoned("hung") == 0
    with pytest.raises(ThreadsExhausted):
        first.run("hung", lambda: 1, 1.0, 1)
    assert second.run("hung", lambda: 2, 1.0, 1) == 2  # the other adapter's count is its own
    assert base.abandoned() == 1  # the process-wide total still sees every scope


def test_deadline_returns_and_abandoned_threads_are_bounded(release: threading.Event) -> None:
    runner = TimedRunner(WorkerPool(8, name="t"))
    for _ in range(2):  # each returns at its 0.05 s deadline, the tool still hung
        with pytest.raises(AttemptTimeout) as info:
            runner.run("hung", lambda: release.wait(30), 0.05, 2)
        assert info.value.started
    assert runner.abandoned("hung") == 2
    with pytest.raises(ThreadsExhausted):
        runner.run("hung", lambda: 1, 0.05, 2)
    assert runner.run("other", lambda: 1, 30.0, 2) == 1  # other tools are unaffected
    release.set()
    deadline = time.monotonic() + 5
    while runner.abandoned("hung") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runner.abandoned() == 0


def test_queued_work_that_never_started_is_cancelled(release: threading.Event) -> None:
    runner = TimedRunner(WorkerPool(1, name="t"))
    with pytest.raises(AttemptTimeout):
        runner.run("a", lambda: release.wait(30), 0.05, 5)
    ran: list[int] = []
    with pytest.raises(AttemptTimeout) as info:
        runner.run("b", lambda: ran.append(1), 0.05, 5)
    assert info.value.started is False
    release.set()
    runner.pool.submit(lambda: None).result(5)  # one worker, FIFO: the queue is drained
    assert ran == []


def test_pool_threads_are_daemons_and_reused() -> None:
    pool = WorkerPool(4, name="t")
    names = {pool.submit(lambda: threading.current_thread()).result() for _ in range(20)}
    assert all(t.daemon for t in names)
    assert pool.threads <= 4


def test_async_deadline_holds_even_if_the_task_ignores_cancellation() -> None:
    """Control comes back at the deadline while the task, which swallows every
    cancellation, is still running: no clock needed, the task ends only when told."""
    cancellations: list[int] = []
    finished: list[bool] = []

    async def main() -> None:
        done = asyncio.Event()

        async def stubborn() -> None:
            loop = asyncio.get_running_loop()
            give_up = loop.time() + 30  # a deadline that waits for it fails, not hangs
            while not done.is_set() and loop.time() < give_up:
                try:
                    await asyncio.wait_for(done.wait(), 1)
                except asyncio.CancelledError:
                    cancellations.append(1)
                except TimeoutError:
                    pass
            finished.append(True)

        with pytest.raises(AttemptTimeout):
            await await_with_timeout(stubborn, 0.05)
        assert finished == []  # back at the deadline, not when the task ended
        for _ in range(5):  # the cancellation reaches the tool on the loop's next turns
            await asyncio.sleep(0)
        done.set()
        while not finished:
            await asyncio.sleep(0)

    asyncio.run(main())
    assert cancellations  # the deadline cancelled the task (which ignored it)


def test_async_runner_offloads_sync_work(release: threading.Event) -> None:
    runner = TimedRunner(WorkerPool(2, name="t"))

    async def main() -> None:
        assert await runner.arun("k", lambda: 7, 1.0, 2) == 7
        with pytest.raises(AttemptTimeout):
            await runner.arun("k", lambda: release.wait(30), 0.05, 2)
        assert runner.abandoned("k") == 1

    asyncio.run(main())


def test_work_queued_behind_a_hung_task_gets_its_own_thread(release: threading.Event) -> None:
    """Two submissions while one worker is idle: the second must not wait behind the first."""
    pool = WorkerPool(4, name="t")
    pool.submit(lambda: None).result(5)  # one worker, now idle
    for _ in range(50):  # the race needs both submissions before the worker wakes
        hung = pool.submit(lambda: release.wait(30))
        quick = pool.submit(lambda: 42)
        assert quick.result(timeout=2) == 42
        release.set()
        hung.result(5)
        release.clear()


def cancel_caller(runner: TimedRunner, fn: Any, ready: Any = lambda: True) -> None:
    """Run `fn` through ``runner.arun`` (no timeout of its own), cancel the caller once
    ``ready()``, and check that the caller sees its cancellation at once."""

    async def main() -> None:
        task = asyncio.ensure_future(runner.arun("k", fn, None, 2))
        await asyncio.sleep(0)  # submitted
        while not ready():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_cancelled_caller_leaves_a_counted_thread_until_it_finishes(
    release: threading.Event,
) -> None:
    """No timeout of its own (as `OffloadedTool`): the caller's cancellation is the
    deadline, and the thread it leaves running is counted like one left at a timeout."""
    runner = TimedRunner(WorkerPool(2, name="t"))
    started = threading.Event()

    def hang() -> str:
        started.set()
        release.wait(30)
        return "late"

    cancel_caller(runner, hang, started.is_set)
    assert runner.abandoned("k") == 1
    release.set()
    deadline = time.monotonic() + 5
    while runner.abandoned("k") and time.monotonic() < deadline:
        time.sleep(0.001)
    assert runner.abandoned("k") == 0


def test_a_caller_cancelled_before_the_job_starts_leaves_nothing_behind(
    release: threading.Event,
) -> None:
    runner = TimedRunner(WorkerPool(1, name="t"))
    ran: list[str] = []
    runner.pool.submit(lambda: release.wait(30))  # the only worker is busy

    cancel_caller(runner, lambda: ran.append("x"))
    assert runner.abandoned("k") == 0
    release.set()
    runner.pool.submit(lambda: None).result(5)
    assert ran == []
