"""Limits shared across workers (`state.limits`, `pipeline.limit`), fast: two adapters on
one `MemoryBackend` behave as two workers on one store; time is a fake clock that the
stage's pacing waits move. The real processes on a real PostgreSQL server are in
`test_limits_postgres.py`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import (
    IgnoredOptionWarning,
    Limits,
    ResilientTool,
    ResilientToolNode,
    Shared,
    Timeouts,
    ToolPolicy,
)
from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.core.errors import AttemptTimeout, BackendError, StateUnavailable
from langchain_resilient_tools.pipeline.limit import core, stage
from langchain_resilient_tools.pipeline.limit.shared import SharedLimit
from langchain_resilient_tools.state.backend import MemoryBackend, StoreBackend
from langchain_resilient_tools.state.limits import gcra, supports_limits
from langchain_resilient_tools.state.sqlite import SqliteBackend
from langchain_resilient_tools.testing import tool_call
from tests._limit_workers import most_in_window
from tests.clock import FakeClock
from tests.support.calls import make_call
from tests.support.graphs import tools_graph
from tests.tools import CALLS, counted

WORKERS = [(a, m) for a in ("node", "tool") for m in ("sync", "async")]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """A fake clock that the limit stage's pacing waits advance (no real sleep)."""
    fake = FakeClock()

    async def apause(seconds: float) -> None:
        fake.advance(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(stage, "_pause", fake.advance)
    monkeypatch.setattr(stage, "_apause", apause)
    return fake


def recording_tool(clock: FakeClock, seen: list[float], name: str = "get_quote") -> BaseTool:
    def run(symbol: str) -> str:
        seen.append(clock())
        return f"{symbol}: 42"

    async def arun(symbol: str) -> str:
        return run(symbol)

    return counted(name, run, coroutine=arun)


class Worker:
    """One adapter (a node or a wrapped tool) on `store`: a worker of its own."""

    def __init__(self, adapter: str, mode: str, tool: BaseTool, policy: ToolPolicy, store: Any):
        self.mode = mode
        if adapter == "node":
            self.node: Any = tools_graph(ResilientToolNode([tool], policy=policy, store=store))
        else:
            self.node = ResilientTool.wrap(tool, policy=policy, store=store)
        self.adapter = adapter

    def call(self, name: str, args: dict[str, Any], id: str) -> ToolMessage:
        tc = tool_call(name, args, id=id)
        payload: Any = tc if self.adapter == "tool" else {"messages": [AIMessage("", tool_calls=[tc])]}  # fmt: skip
        if self.mode == "sync":
            out = self.node.invoke(payload)
        else:
            out = asyncio.run(self.node.ainvoke(payload))
        message = out if self.adapter == "tool" else out["messages"][-1]
        assert isinstance(message, ToolMessage)
        return message


def _policy(clock: FakeClock, **limits: Any) -> ToolPolicy:
    return ToolPolicy(
        clock=clock, timeout=None, timeouts=Timeouts(deadline=None), limits=Limits(**limits)
    )


@pytest.mark.parametrize(("adapter", "mode"), WORKERS)
def test_two_workers_on_one_store_share_one_rate(clock: FakeClock, adapter: str, mode: str) -> None:
    backend, seen = MemoryBackend(clock=clock), []
    policy = _policy(clock, rate_limit=10)
    workers = [Worker(adapter, mode, recording_tool(clock, seen), policy, backend) for _ in "ab"]
    for i in range(20):
        answer = workers[i % 2].call("get_quote", {"symbol": f"S{i}"}, f"c{i}")
        assert answer.status == "success"
    gaps = [b - a for a, b in itertools.pairwise(seen)]
    assert min(gaps) == pytest.approx(0.1)  # one bucket: one call every 0.1 s, whoever asks
    assert most_in_window(seen) == 10 + 1  # R + the burst (1)
    assert CALLS["get_quote"] == 20


def test_workers_with_stores_of_their_own_each_hold_the_rate_alone(clock: FakeClock) -> None:
    """The control: two processes that do not share a store send twice the rate."""
    seen: list[float] = []
    policy = _policy(clock, rate_limit=10)
    workers = [
        Worker("tool", "sync", recording_tool(clock, seen), policy, MemoryBackend(clock=clock))
        for _ in "ab"
    ]
    for i in range(20):
        workers[i % 2].call("get_quote", {"symbol": f"S{i}"}, f"c{i}")
    assert most_in_window(seen) == 2 * 10


def test_the_burst_lets_that_many_start_at_once(clock: FakeClock) -> None:
    backend, seen = MemoryBackend(clock=clock), []
    policy = _policy(clock, rate_limit=10, burst=4)
    worker = Worker("tool", "sync", recording_tool(clock, seen), policy, backend)
    for i in range(30):
        worker.call("get_quote", {"symbol": f"S{i}"}, f"c{i}")
    assert seen[:4] == pytest.approx([seen[0]] * 4)  # a new bucket starts full
    assert most_in_window(seen) == 10 + 4
    assert seen[-1] - seen[0] == pytest.approx((30 - 4) / 10)


def _hold(worker: Worker, release: threading.Event, started: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=worker.call, args=("get_quote", {"symbol": "A"}, "held"))
    thread.start()
    assert started.wait(10)
    return thread


def _blocking_tool(started: threading.Event, release: threading.Event) -> BaseTool:
    def run(symbol: str) -> str:
        if symbol == "A":
            started.set()
            release.wait(10)
        return f"{symbol}: 42"

    return counted("get_quote", run)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def stores(
    request: pytest.FixtureRequest, clock: FakeClock, tmp_path: Any
) -> Iterator[Callable[[], Any]]:
    """Each worker's `store=` on one shared store: the same `MemoryBackend` (one
    process), or a connection of its own to one SQLite file or one Redis server."""
    made: list[Any] = []
    if request.param == "memory":
        backend = MemoryBackend(clock=clock)
        yield lambda: backend
        return
    if request.param == "sqlite":
        path = os.path.join(tmp_path, "state.db")
        connect: Callable[[], Any] = lambda: SqliteBackend(path)  # noqa: E731
    else:
        import redis

        url = request.getfixturevalue("redis_url")
        connect = lambda: redis.Redis.from_url(url)  # noqa: E731

    def store() -> Any:
        made.append(connect())
        return made[-1]

    yield store
    for each in made:
        each.close()


def test_a_worker_finds_the_bucket_another_emptied(clock: FakeClock, stores: Any) -> None:
    """One token every 10 s: the first worker's call takes it; the second worker's, with
    3 s left before its deadline, is answered at once, without running the tool."""
    policy = ToolPolicy(clock=clock, timeout=1, limits=Limits(rate_limit=0.1))
    seen: list[float] = []
    first, second = (Worker("tool", "sync", recording_tool(clock, seen), policy, stores()) for _ in "ab")  # fmt: skip
    assert first.call("get_quote", {"symbol": "A"}, "c1").status == "success"
    data = json.loads(str(second.call("get_quote", {"symbol": "B"}, "c2").content))
    assert data["error"] == "timeout"
    assert CALLS["get_quote"] == 1 and clock() == 1000.0  # no time spent waiting in vain


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slot_held_by_one_worker_makes_another_wait_until_its_deadline(
    clock: FakeClock, mode: str, stores: Any
) -> None:
    started, release = threading.Event(), threading.Event()
    policy = ToolPolicy(clock=clock, timeout=1, limits=Limits(max_concurrency=1))
    tool = _blocking_tool(started, release)
    holder = Worker("node", "sync", tool, policy.model_copy(update={"timeout": 30}), stores())
    other = Worker("node", mode, tool, policy, stores())
    thread = _hold(holder, release, started)
    try:
        answer = other.call("get_quote", {"symbol": "B"}, "c2")
        data = json.loads(str(answer.content))
        assert data["error"] == "timeout"  # waited for the slot up to its deadline (3 s)
        assert CALLS["get_quote"] == 1  # and never ran
    finally:
        release.set()
        thread.join(10)
    assert other.call("get_quote", {"symbol": "C"}, "c3").status == "success"  # given back
    assert CALLS["get_quote"] == 2


def test_the_slot_of_a_worker_that_died_comes_back_after_its_lease(clock: FakeClock) -> None:
    backend = MemoryBackend(clock=clock)
    # A dead worker's attempt: it took the tool's only slot and never gave it back.
    assert backend.acquire_lease("get_quote", cap=1, holder="dead", ttl=2.0)
    policy = ToolPolicy(clock=clock, timeout=5, limits=Limits(max_concurrency=1, lease_s=2.0))
    seen: list[float] = []
    worker = Worker("tool", "sync", recording_tool(clock, seen), policy, backend)
    start = clock()
    answer = worker.call("get_quote", {"symbol": "B"}, "c1")
    assert answer.status == "success"
    assert 2.0 <= seen[0] - start < 2.5  # ran once the lease ran out, not before


class FailingLimits(MemoryBackend):
    """A store whose limit operations fail (a partition), but for its other state."""

    def take_token(self, key: str, *, rate: float, burst: float) -> float:
        raise BackendError("state store failed: OperationalError")

    def acquire_lease(self, key: str, *, cap: int, holder: str, ttl: float) -> bool:
        raise BackendError("state store failed: OperationalError")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_store_refuses_when_closed(clock: FakeClock, mode: str) -> None:
    policy = ToolPolicy(
        clock=clock,
        limits=Limits(rate_limit=5, max_concurrency=2),
        shared=Shared(on_error="closed"),
    )
    worker = Worker("node", mode, recording_tool(clock, []), policy, FailingLimits(clock=clock))
    data = json.loads(str(worker.call("get_quote", {"symbol": "A"}, "c1").content))
    assert data["error"] == "transient_failure"
    assert CALLS["get_quote"] == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_store_falls_back_to_the_local_limits_when_open(
    clock: FakeClock, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    policy = ToolPolicy(clock=clock, limits=Limits(rate_limit=1000, max_concurrency=2))
    worker = Worker("node", mode, recording_tool(clock, []), policy, FailingLimits(clock=clock))
    assert worker.call("get_quote", {"symbol": "A"}, "c1").status == "success"
    assert CALLS["get_quote"] == 1
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "shared max_concurrency" in said and "shared rate_limit" in said


def test_a_store_that_cannot_share_limits_says_so_once(clock: FakeClock) -> None:
    policy = _policy(clock, max_concurrency=2)
    worker = Worker("tool", "sync", recording_tool(clock, []), policy, InMemoryStore())
    with pytest.warns(IgnoredOptionWarning, match="'get_quote'.*per process.*InMemoryStore"):
        worker.call("get_quote", {"symbol": "A"}, "c1")
    worker.call("get_quote", {"symbol": "B"}, "c2")  # said once: no warning now (an error)
    assert CALLS["get_quote"] == 2
    local = ToolPolicy(
        clock=clock, limits=Limits(max_concurrency=2), shared=Shared(backend="local")
    )
    Worker("tool", "sync", recording_tool(clock, []), local, InMemoryStore()).call(
        "get_quote", {"symbol": "C"}, "c3"
    )  # per process by choice: nothing to say


def test_the_async_path_asks_the_store_off_the_event_loop(clock: FakeClock) -> None:
    asked_on: list[str] = []

    class Watched(MemoryBackend):
        def take_token(self, key: str, *, rate: float, burst: float) -> float:
            asked_on.append(threading.current_thread().name)
            return super().take_token(key, rate=rate, burst=burst)

    worker = Worker("node", "async", recording_tool(clock, []), _policy(clock, rate_limit=5), Watched(clock=clock))  # fmt: skip
    loop_thread = threading.current_thread().name  # asyncio.run runs the loop here
    assert worker.call("get_quote", {"symbol": "A"}, "c1").status == "success"
    assert asked_on and loop_thread not in asked_on


# -- the core: what one attempt waits for ----------------------------------------------


def _call(clock: FakeClock, backend: MemoryBackend, **fields: Any) -> tuple[Call, SharedLimit]:
    policy = _policy(clock, rate_limit=10, max_concurrency=1)
    call = make_call("get_item", {}, policy, **fields)
    return call, SharedLimit(backend, call)


def _steps(queue: core.Queue) -> list[Any]:
    """Drive the core by hand: each store operation run in place, each pause recorded."""
    done: list[Any] = []
    steps = queue.steps()
    sent: Any = None
    thrown: BackendError | None = None
    while True:
        try:
            step = steps.send(sent) if thrown is None else steps.throw(thrown)
        except StopIteration:
            return done
        sent = thrown = None
        if isinstance(step, float):
            done.append(step)
            queue.call.resolved.policy.clock.advance(step)  # type: ignore[attr-defined]
            continue
        done.append(step.__name__)
        try:
            sent = step()
        except BackendError as exc:
            thrown = exc


def test_the_core_asks_for_a_lease_then_a_token_and_waits_as_the_store_says() -> None:
    clock = FakeClock()
    backend = MemoryBackend(clock=clock)
    call, shared = _call(clock, backend)
    assert _steps(core.Queue(call, None, None, shared)) == ["acquire", "take"]
    assert shared.held
    call2, other = _call(clock, backend)
    backend.take_token("get_item", rate=10, burst=1)  # someone took the next token
    shared.release()  # and the first attempt is done
    steps = _steps(core.Queue(call2, None, None, other))
    assert steps == ["acquire", "take", pytest.approx(0.1), "take"]
    other.release()


def test_the_core_never_waits_for_a_hedge_or_past_the_deadline() -> None:
    clock = FakeClock()
    backend = MemoryBackend(clock=clock)
    first, shared = _call(clock, backend)
    _steps(core.Queue(first, None, None, shared))
    hedge, other = _call(clock, backend, hedge=1)
    with pytest.raises(AttemptTimeout) as no_slot:
        _steps(core.Queue(hedge, None, None, other))
    assert no_slot.value.started is False
    shared.release()
    backend.take_token("get_item", rate=10, burst=1)
    near, third = _call(clock, backend, deadline=clock() + 0.05)
    with pytest.raises(AttemptTimeout):  # the next token is due in 0.1 s: answered at once
        _steps(core.Queue(near, None, None, third))
    assert clock() == 1000.0  # no time was spent waiting for it
    third.release()  # (the drivers give the slot back in `finally`)
    assert backend.acquire_lease("get_item", cap=1, holder="next", ttl=1)


def test_a_closed_policy_refuses_when_the_store_fails() -> None:
    clock = FakeClock()
    policy = ToolPolicy(clock=clock, limits=Limits(rate_limit=10), shared=Shared(on_error="closed"))
    call = make_call("get_item", {}, policy)
    with pytest.raises(StateUnavailable):
        _steps(core.Queue(call, None, None, SharedLimit(FailingLimits(clock=clock), call)))


# -- the backends' limit operations: one contract ---------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def limits(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[Any, FakeClock]]:
    clock = FakeClock()
    if request.param == "memory":
        yield MemoryBackend(clock=clock), clock
        return
    backend = SqliteBackend(os.path.join(tmp_path, "limits.db"), clock=clock)
    yield backend, clock
    backend.close()


def test_a_bucket_starts_full_and_refills_at_its_rate(limits: tuple[Any, FakeClock]) -> None:
    backend, clock = limits
    assert supports_limits(backend)
    take: Callable[[], float] = lambda: backend.take_token("k", rate=4, burst=2)  # noqa: E731
    assert [take(), take()] == [0.0, 0.0]
    assert take() == pytest.approx(0.25)  # nothing taken: the wait for the next one
    clock.advance(0.25)
    assert take() == 0.0
    assert take() == pytest.approx(0.25)
    clock.advance(10)  # a quiet spell refills the bucket to its burst, no more
    assert [take(), take(), take() > 0] == [0.0, 0.0, True]
    assert backend.take_token("other", rate=4, burst=1) == 0.0  # buckets are per key


def test_leases_count_up_to_the_cap_and_expire(limits: tuple[Any, FakeClock]) -> None:
    backend, clock = limits
    assert backend.acquire_lease("k", cap=2, holder="a", ttl=5)
    assert backend.acquire_lease("k", cap=2, holder="b", ttl=1)
    assert not backend.acquire_lease("k", cap=2, holder="c", ttl=5)
    assert backend.renew_lease("k", holder="a", ttl=5)
    assert not backend.renew_lease("k", holder="never", ttl=5)
    clock.advance(1.5)  # b's lease ran out: its slot counts as free
    assert not backend.renew_lease("k", holder="b", ttl=5)
    assert backend.acquire_lease("k", cap=2, holder="c", ttl=5)
    backend.release_lease("k", holder="a")
    backend.release_lease("k", holder="a")  # twice: nothing
    assert backend.acquire_lease("k", cap=2, holder="d", ttl=5)
    assert not backend.acquire_lease("k", cap=2, holder="e", ttl=5)


def test_gcra_is_a_token_bucket() -> None:
    tat, wait = gcra(None, 100.0, rate=2, burst=1)
    assert (tat, wait) == (100.5, 0.0)
    assert gcra(tat, 100.2, rate=2, burst=1) == (100.5, pytest.approx(0.3))
    assert gcra(tat, 100.5, rate=2, burst=1) == (101.0, 0.0)


def test_only_stores_with_atomic_decisions_share_limits() -> None:
    assert supports_limits(MemoryBackend())
    assert not supports_limits(StoreBackend(InMemoryStore()))


def test_the_store_clock_is_the_local_one_corrected_by_the_measured_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_resilient_tools.state import limits

    local, asked_on = FakeClock(1000.0), []

    def sample() -> float:  # the store's clock is 30 s ahead
        asked_on.append(threading.current_thread().name)
        return local() + 30.0

    clock = limits.StoreClock(local, sample)
    assert clock() == 1030.0 and len(asked_on) == 1
    local.advance(2.0)
    assert clock() == 1032.0 and len(asked_on) == 1  # measured again only now and then
    monkeypatch.setattr(limits, "CLOCK_REFRESH_S", 0.0)
    clock.refresh()
    assert len(asked_on) == 2

    async def on_a_loop() -> tuple[float, str]:
        return clock(), threading.current_thread().name

    now, loop_thread = asyncio.run(on_a_loop())
    assert now == 1032.0  # the last offset, at once
    for _ in range(500):  # measured on a thread of its own meanwhile
        if len(asked_on) == 3:
            break
        threading.Event().wait(0.01)
    assert asked_on[2] != loop_thread

    def failing() -> float:
        raise BackendError("state store failed: OperationalError")

    down = limits.StoreClock(local, failing)
    assert down() == local()  # no offset measured: the local clock, and no error
