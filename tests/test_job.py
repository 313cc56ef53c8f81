"""`Job`, the worker pool's light future: run once, cancel before start, wait, callbacks."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import CancelledError
from typing import Any

import pytest

from langchain_resilient_tools.runtime.job import Job


def on_thread(job: Job[Any]) -> threading.Thread:
    thread = threading.Thread(target=job.run)
    thread.start()
    return thread


def test_result_and_exception() -> None:
    ok: Job[int] = Job(lambda: 7)
    ok.run()
    assert ok.done() and ok.result() == 7 and ok.exception() is None
    bad: Job[int] = Job(lambda: {}["x"])
    bad.run()
    assert isinstance(bad.exception(), KeyError)
    with pytest.raises(KeyError):
        bad.result()


def test_wait_times_out_while_running_then_sees_the_result() -> None:
    gate = threading.Event()
    job: Job[str] = Job(lambda: gate.wait(5) and "done")
    thread = on_thread(job)
    with pytest.raises(TimeoutError):
        job.result(timeout=0.01)
    assert not job.done() and not job.cancel()  # started: too late to cancel
    gate.set()
    assert job.result(timeout=5) == "done"
    thread.join()


def test_cancel_before_start_wins_and_the_job_never_runs() -> None:
    ran: list[int] = []
    job: Job[None] = Job(lambda: ran.append(1))
    assert job.cancel() and job.cancel()  # idempotent
    job.run()
    assert ran == [] and job.cancelled() and job.done()
    with pytest.raises(CancelledError):
        job.result()


def test_several_waiters_all_wake() -> None:
    gate = threading.Event()
    job: Job[int] = Job(lambda: gate.wait(5) and 1)
    seen: list[int] = []
    waiters = [threading.Thread(target=lambda: seen.append(job.result(5))) for _ in range(3)]
    for w in waiters:
        w.start()
    on_thread(job)
    gate.set()
    for w in waiters:
        w.join(5)
    assert seen == [1, 1, 1]


def test_done_callbacks_before_and_after_finishing(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    job: Job[int] = Job(lambda: 1)
    job.add_done_callback(lambda j: calls.append(f"early {j.result()}"))

    def broken(_: Job[int]) -> None:
        raise RuntimeError("callback bug")

    job.add_done_callback(broken)
    with caplog.at_level(logging.ERROR):
        job.run()
    assert "callback failed" in caplog.text  # logged; the job and later callbacks go on
    job.add_done_callback(lambda j: calls.append(f"late {j.result()}"))
    assert calls == ["early 1", "late 1"]


def test_ready_is_called_before_the_caller_wakes() -> None:
    order: list[str] = []
    job: Job[int] = Job(lambda: 1)
    job.add_done_callback(lambda _: order.append("woken"))
    job.run(ready=lambda: order.append("ready"))
    assert order == ["ready", "woken"]
    cancelled: Job[int] = Job(lambda: 1)
    cancelled.cancel()
    cancelled.run(ready=lambda: order.append("ready again"))  # a worker is idle again
    assert order[-1] == "ready again"
