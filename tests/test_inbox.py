"""`Inbox`: worker results reach their loop in order, with one wake-up per batch."""

from __future__ import annotations

import asyncio
import threading
import time
from functools import partial
from typing import Any

import pytest

from langchain_resilient_tools.runtime.executor import TimedRunner, WorkerPool
from langchain_resilient_tools.runtime.inbox import Inbox, inbox_for


class CountingLoop(asyncio.SelectorEventLoop):
    """Counts the wake-ups other threads ask for."""

    def __init__(self) -> None:
        super().__init__()
        self.threadsafe_calls = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:
        self.threadsafe_calls += 1
        return super().call_soon_threadsafe(*args, **kwargs)


@pytest.fixture
def loop() -> Any:
    loop = CountingLoop()
    yield loop
    loop.close()


def test_items_posted_together_share_one_wake_up_and_keep_their_order(loop: Any) -> None:
    inbox = Inbox(loop)
    seen: list[int] = []
    workers = [threading.Thread(target=inbox.post, args=(seen.append, i)) for i in range(5)]
    for worker in workers:  # sequentially: the order of posting is known
        worker.start()
        worker.join()
    assert loop.threadsafe_calls == 1
    loop.run_until_complete(asyncio.sleep(0))
    assert seen == [0, 1, 2, 3, 4]
    inbox.post(seen.append, 5)  # drained: the next item wakes the loop again
    assert loop.threadsafe_calls == 2
    loop.run_until_complete(asyncio.sleep(0))
    assert seen == [0, 1, 2, 3, 4, 5]


def test_nothing_is_lost_when_workers_race_the_drain(loop: Any) -> None:
    inbox = Inbox(loop)
    got: list[int] = []
    n_threads, per_thread = 8, 500

    def worker(base: int) -> None:
        for i in range(per_thread):
            inbox.post(got.append, base + i)

    async def main() -> None:
        threads = [
            threading.Thread(target=worker, args=(t * per_thread,)) for t in range(n_threads)
        ]
        for t in threads:
            t.start()
        while len(got) < n_threads * per_thread:
            await asyncio.sleep(0.001)
        for t in threads:
            t.join()

    loop.run_until_complete(asyncio.wait_for(main(), 30))
    assert sorted(got) == list(range(n_threads * per_thread))
    assert loop.threadsafe_calls < n_threads * per_thread


def test_posting_to_a_closed_loop_does_not_raise() -> None:
    loop = asyncio.new_event_loop()
    inbox = Inbox(loop)
    loop.close()
    inbox.post(print, "never")  # a worker finishing after its caller's loop is gone


def test_inbox_for_follows_the_loop_of_the_thread() -> None:
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        a = inbox_for(first)
        assert inbox_for(first) is a
        b = inbox_for(second)
        assert b is not a and b.loop is second
        assert inbox_for(first).loop is first
    finally:
        first.close()
        second.close()


def test_ten_offloaded_calls_finishing_together_wake_their_loop_once(loop: Any) -> None:
    runner = TimedRunner(WorkerPool(4, name="t-inbox"))
    gate = threading.Event()

    def job(i: int) -> int:
        gate.wait(5)
        return i

    async def main() -> list[int]:
        tasks = [
            asyncio.ensure_future(runner.arun("k", partial(job, i), 5.0, 4)) for i in range(10)
        ]
        await asyncio.sleep(0)  # every job submitted (four running, six queued)
        gate.set()
        # The loop is held here (as if busy with other calls) until all ten results
        # are posted: they must then need a single wake-up, not one each.
        pending = inbox_for(loop)._items
        deadline = time.monotonic() + 5
        while len(pending) < 10 and time.monotonic() < deadline:
            time.sleep(0.001)
        return list(await asyncio.gather(*tasks))

    assert loop.run_until_complete(main()) == list(range(10))
    assert loop.threadsafe_calls == 1


def test_a_failing_callback_does_not_strand_the_others(loop: Any, caplog: Any) -> None:
    inbox = Inbox(loop)
    seen: list[int] = []

    def boom() -> None:
        raise RuntimeError("boom")

    inbox.post(seen.append, 1)
    inbox.post(boom)
    inbox.post(seen.append, 2)
    loop.run_until_complete(asyncio.sleep(0))
    assert seen == [1, 2]
    assert "an inbox callback failed" in caplog.text
