"""Rate limits: a service's 429 refusals and retry hints, and client-side limits per tool."""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest
import requests
from langchain_core import rate_limiters

from langchain_resilient_tools import Limits, RetryPolicy, Timeouts, ToolPolicy
from langchain_resilient_tools.core.hints import is_rate_limited, retry_after
from langchain_resilient_tools.pipeline.limit import core as limit
from langchain_resilient_tools.pipeline.limit import stage as limit_stage
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.support.answers import error_of
from tests.support.calls import make_call
from tests.tools import CALLS, counted, started


class FakeService:
    """An HTTP service (httpx `MockTransport`) that answers 429 `refusals` times first."""

    def __init__(self, refusals: int, retry_after: str | None = "2") -> None:
        self.refusals = refusals
        self.retry_after = retry_after
        self.acted: Counter[str] = Counter()
        self.client = httpx.Client(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.refusals > 0:
            self.refusals -= 1
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            return httpx.Response(429, headers=headers, json={"error": "slow down"})
        self.acted[request.url.path] += 1
        return httpx.Response(200, json={"ok": request.url.path})

    def tool(self, name: str) -> Any:
        def call(item: str) -> str:
            response = self.client.post(f"https://svc.test/{name}/{item}")
            response.raise_for_status()  # httpx.HTTPStatusError on a 429
            return response.text

        return counted(name, call)


def test_a_read_refused_with_429_waits_the_hinted_time(harness: Harness, testing_mode: Any) -> None:
    service = FakeService(refusals=1, retry_after="2")
    result = harness.run(
        [service.tool("get_quote")], [tool_call("get_quote", {"item": "a"}, id="c1")]
    )
    assert result["c1"].status == "success"
    assert testing_mode.sleeps and testing_mode.sleeps[0] >= 2.0
    assert CALLS["get_quote"] == 2


def test_a_write_refused_with_429_is_retried_it_was_not_carried_out(
    harness: Harness, testing_mode: Any
) -> None:
    service = FakeService(refusals=1, retry_after="1")
    result = harness.run(
        [service.tool("create_order")], [tool_call("create_order", {"item": "a"}, id="c1")]
    )
    assert result["c1"].status == "success"
    assert service.acted["/create_order/a"] == 1  # carried out exactly once
    assert testing_mode.sleeps[0] >= 1.0


def test_refused_writes_can_be_left_unretried(harness: Harness) -> None:
    service = FakeService(refusals=1, retry_after="2")
    policy = ToolPolicy(retry=RetryPolicy(retry_refused_writes=False))
    result = harness.run(
        [service.tool("create_order")],
        [tool_call("create_order", {"item": "a"}, id="c1")],
        policy=policy,
    )
    data = error_of(result, "c1")
    assert data["error"] == "rate_limited"  # not unknown_outcome: the service refused it
    assert data["retry_after_s"] == 2.0 and data["retryable"] is True
    assert data["attempts"] == 1 and service.acted["/create_order/a"] == 0
    assert "2 s" in data["suggestion"]


def test_a_hint_past_the_deadline_is_answered_at_once(harness: Harness, testing_mode: Any) -> None:
    service = FakeService(refusals=5, retry_after="30")
    policy = ToolPolicy(timeout=1)  # deadline 3 s: a 30 s wait does not fit
    result = harness.run(
        [service.tool("get_quote")],
        [tool_call("get_quote", {"item": "a"}, id="c1")],
        policy=policy,
    )
    data = error_of(result, "c1")
    assert data["error"] == "rate_limited" and data["retry_after_s"] == 30.0
    assert data["attempts"] == 1 and testing_mode.sleeps == []


def test_a_429_without_hint_is_retried_with_backoff(harness: Harness) -> None:
    service = FakeService(refusals=5, retry_after=None)
    result = harness.run(
        [service.tool("get_quote")], [tool_call("get_quote", {"item": "a"}, id="c1")]
    )
    data = error_of(result, "c1")
    assert data["error"] == "rate_limited" and "retry_after_s" not in data
    assert data["attempts"] == 3


class Throttled(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__("throttled")
        self.retry_after = seconds


def test_retry_hints_of_common_clients() -> None:
    request = httpx.Request("GET", "https://svc.test/")
    http = httpx.HTTPStatusError(
        "429", request=request, response=httpx.Response(429, headers={"Retry-After": "3"})
    )
    assert is_rate_limited(http) and retry_after(http) == 3.0
    response = requests.Response()
    response.status_code = 429
    when = email.utils.formatdate(time.time() + 60, usegmt=True)
    response.headers["retry-after"] = when
    req = requests.HTTPError("429", response=response)
    assert is_rate_limited(req) and 55 < (retry_after(req) or 0) <= 60
    assert is_rate_limited(Throttled(1.5)) and retry_after(Throttled(1.5)) == 1.5
    server_error = httpx.HTTPStatusError(
        "503", request=request, response=httpx.Response(503, headers={"Retry-After": "3"})
    )
    assert not is_rate_limited(server_error)  # may have been half done: not a refusal
    assert not is_rate_limited(ValueError("rate limit in the text only"))


def test_an_exception_with_retry_after_attribute_becomes_rate_limited(harness: Harness) -> None:
    def send_email(to: str) -> str:
        raise Throttled(4)

    policy = ToolPolicy(retry=RetryPolicy(max_attempts=1))
    result = harness.run(
        [counted("send_email", send_email)],
        [tool_call("send_email", {"to": "a@b.c"}, id="c1")],
        policy=policy,
    )
    data = error_of(result, "c1")
    assert data["error"] == "rate_limited" and data["retry_after_s"] == 4.0


# -- client-side limits ---------------------------------------------------------------


def test_max_concurrency_holds_for_fifty_parallel_calls(harness: Harness) -> None:
    lock = threading.Lock()
    now = [0]
    peak = [0]

    def enter() -> None:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])

    def leave() -> None:
        with lock:
            now[0] -= 1

    def get_item(n: int) -> str:
        enter()
        time.sleep(0.002)  # overlap with the other calls
        leave()
        return f"item {n}"

    async def aget_item(n: int) -> str:
        enter()
        for _ in range(5):
            await asyncio.sleep(0)
        leave()
        return f"item {n}"

    tool = counted("get_item", get_item, coroutine=aget_item)
    calls = [tool_call("get_item", {"n": i}, id=f"c{i}") for i in range(50)]
    result = harness.run([tool], calls, policy=ToolPolicy(limits=Limits(max_concurrency=5)))
    assert all(result[f"c{i}"].status == "success" for i in range(50))
    assert 1 <= peak[0] <= 5
    assert CALLS["get_item"] == 50


def test_waiting_for_a_slot_counts_against_the_deadline(harness: Harness) -> None:
    release = harness.hang_event()

    def get_item(n: int) -> str:
        release.wait(5)
        return "late"

    tool = counted("get_item", get_item)
    policy = ToolPolicy(
        timeout=0.2, retry=RetryPolicy(max_attempts=1), limits=Limits(max_concurrency=1)
    )
    calls = [tool_call("get_item", {"n": i}, id=f"c{i}") for i in range(2)]
    result = harness.run([tool], calls, policy=policy)
    errors = sorted(error_of(result, f"c{i}")["error"] for i in range(2))
    assert errors == ["timeout", "timeout"]
    # The second ran only if the first's slot came free; the first may start late.
    assert started("get_item") in (1, 2)


class RecordingLimiter(rate_limiters.InMemoryRateLimiter):
    """The limiter behind ``Limits(rate_limit=10)`` (`limit.make_limiter`), on a fake clock,
    recording the clock at each token it grants (under the lock the fake waits take, so
    no thread moves the clock between a grant and its record)."""

    def __init__(self, clock: FakeClock, lock: threading.Lock) -> None:
        template = limit.make_limiter(10)
        super().__init__(
            requests_per_second=template.requests_per_second,
            check_every_n_seconds=template.check_every_n_seconds,
            max_bucket_size=template.max_bucket_size,
        )
        self.clock, self.lock = clock, lock
        self.grants: list[float] = []

    def _consume(self) -> bool:
        with self.lock:
            granted = super()._consume()
            if granted:
                self.grants.append(self.clock())
            return granted


@pytest.fixture
def fake_limiter(monkeypatch: pytest.MonkeyPatch) -> RecordingLimiter:
    """A limiter and the stage's pacing waits on one fake clock."""
    clock = FakeClock()
    lock = threading.Lock()

    class FakeTime:
        monotonic = staticmethod(clock)

    def pause(seconds: float) -> None:
        with lock:
            clock.advance(seconds)

    async def apause(seconds: float) -> None:
        pause(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(rate_limiters, "time", FakeTime)
    monkeypatch.setattr(limit_stage, "_pause", pause)
    monkeypatch.setattr(limit_stage, "_apause", apause)
    return RecordingLimiter(clock, lock)


def test_calls_per_second_holds_within_ten_percent(
    harness: Harness, fake_limiter: RecordingLimiter
) -> None:
    def get_item(n: int) -> str:
        return f"item {n}"

    async def aget_item(n: int) -> str:
        return get_item(n)

    tool = counted("get_item", get_item, coroutine=aget_item)
    policy = ToolPolicy(
        timeout=None, limits=Limits(rate_limit=fake_limiter), timeouts=Timeouts(deadline=None)
    )
    calls = [tool_call("get_item", {"n": i}, id=f"c{i}") for i in range(30)]
    result = harness.run([tool], calls, policy=policy)
    assert all(result[f"c{i}"].status == "success" for i in range(30))
    grants = fake_limiter.grants
    assert len(grants) == 30 == CALLS["get_item"]  # one token per attempt
    rate = (len(grants) - 1) / (grants[-1] - grants[0])
    assert 9.0 <= rate <= 11.0, rate
    queued = [
        result[f"c{i}"].response_metadata["resilience"].get("queued_ms", 0) for i in range(30)
    ]
    assert max(queued) > 0  # the wait for a token is visible in the record


def test_a_rate_in_calls_per_second_uses_langchains_limiter() -> None:
    limiter = limit.make_limiter(10)
    assert isinstance(limiter, rate_limiters.InMemoryRateLimiter)
    assert limiter.requests_per_second == 10 and limiter.max_bucket_size == 1


def test_slots_hand_over_in_order_and_never_leak() -> None:
    from langchain_resilient_tools.runtime.slots import Slots

    slots = Slots(1)
    assert slots.acquire(None) and slots.in_use == 1
    assert not slots.acquire(0)  # no slot within the timeout: the waiter leaves the queue
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(5)))
    waiter.start()
    while not slots._waiters:  # the thread is queued
        time.sleep(0.001)
    slots.release()  # handed to the waiter, not freed
    waiter.join()
    assert got == [True] and slots.in_use == 1

    async def cancelled_waiter() -> None:
        task = asyncio.ensure_future(slots.aacquire(None))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not await slots.aacquire(0)

    asyncio.run(cancelled_waiter())
    slots.release()
    assert slots.in_use == 0 and not slots._waiters
    assert asyncio.run(slots.aacquire(0)) and slots.in_use == 1


class _Grants(rate_limiters.BaseRateLimiter):
    """A limiter that grants a token on every `every`-th ask (no waiting, no clock)."""

    check_every_n_seconds = 0.25

    def __init__(self, every: int) -> None:
        self.every, self.asked = every, 0

    def acquire(self, *, blocking: bool = True) -> bool:
        self.asked += 1
        return self.asked % self.every == 0

    async def aacquire(self, *, blocking: bool = True) -> bool:
        return self.acquire(blocking=blocking)


def test_the_queue_decides_the_waits_both_drivers_make() -> None:
    """The core of the limits stage: how long to pause for a token, and when to give up."""
    from langchain_resilient_tools.core.call import Call
    from langchain_resilient_tools.core.errors import AttemptTimeout

    clock = FakeClock()
    policy = ToolPolicy(clock=clock)

    def call(**fields: Any) -> Call:
        return make_call("get_item", {}, policy, **fields)

    queue = limit.Queue(call(), None, _Grants(every=3))
    assert [queue.pause(), queue.pause(), queue.pause()] == [0.25, 0.25, None]
    clock.advance(0.5)
    queue.admitted()
    assert queue.call.record.queued_ms == 500.0
    near = limit.Queue(call(deadline=clock() + 0.1), None, _Grants(every=9))
    assert near.pause() == pytest.approx(0.1)  # cut to what is left of the deadline
    clock.advance(0.1)
    with pytest.raises(AttemptTimeout) as late:
        near.pause()
    assert late.value.started is False and late.value.timeout == pytest.approx(0.1)
    with pytest.raises(AttemptTimeout):
        limit.Queue(call(hedge=1), None, _Grants(every=2)).pause()  # a hedge never waits
    assert limit.Queue(call(hedge=1), None, None).slot_wait() == 0.0
    assert limit.Queue(call(deadline=clock() + 2.0), None, None).slot_wait() == 2.0
    assert limit.Queue(call(), None, None).pause() is None  # no limiter: nothing to wait for
