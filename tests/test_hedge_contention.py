"""Hedged reads on a busy machine: the delay is the service's, not the scheduler's.

What changed for issue #46 (see `pipeline.hedge.stage`): each attempt carries a
`core.probe.Probe`, stamped where the tool runs; the ``"auto"`` delay is learned from the
tool's own time (not from the wait for a thread or a token, nor for the caller to wake
up); a hedge is due a delay after the first attempt reached its tool; a losing attempt
is counted by the thread it holds, and one that has not begun never runs; the budget's
burst is saved up, never lent, so it counts inside `Hedge.budget`.

Time is the injected `FakeClock`: waits for a token or a slot move it without the tool
running, so what is learned or due never depends on real time.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

import pytest
from langchain_core.rate_limiters import BaseRateLimiter

from langchain_resilient_tools import Hedge, Limits, ToolPolicy
from langchain_resilient_tools.core.errors import Superseded
from langchain_resilient_tools.core.policy import overlay
from langchain_resilient_tools.core.probe import Probe
from langchain_resilient_tools.pipeline.hedge import logic
from langchain_resilient_tools.pipeline.hedge.logic import AUTO_MIN_SAMPLES, Move, Race
from langchain_resilient_tools.pipeline.hedge.stage import HedgeStage
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.test_hedge import hedge_stage
from tests.tools import CALLS, counted

SERVICE_S = 0.02
"""What the tool itself takes, on the fake clock."""
TOKEN_WAIT_S = 1.0
"""What each wait for a rate-limit token takes, on the fake clock (the tool not running)."""


class SlowTokens(BaseRateLimiter):
    """A rate limiter whose every token takes `TOKEN_WAIT_S` of fake time to come; the
    `hold`-th acquire (1-based) then also waits for `held` to be set."""

    def __init__(self, clock: FakeClock, *, hold: int = 0) -> None:
        self.clock = clock
        self.hold = hold
        self.acquired = 0
        self.holding = threading.Event()
        """Set while the held acquire waits."""
        self.held = threading.Event()

    def acquire(self, *, blocking: bool = True) -> bool:
        self.acquired += 1
        self.clock.advance(TOKEN_WAIT_S)
        if self.acquired == self.hold:
            self.holding.set()
            assert self.held.wait(30)
        return True

    async def aacquire(self, *, blocking: bool = True) -> bool:
        return self.acquire(blocking=blocking)


def _policy(clock: FakeClock, **fields: Any) -> ToolPolicy:
    base = ToolPolicy(hedge=Hedge(delay=0.5, budget=1.0), clock=clock, dedup="off")
    return overlay(base, ToolPolicy(**fields))


# -- the race core: due from when the first attempt reached its tool ----------------------


def test_a_hedge_is_due_a_delay_after_the_first_attempt_reached_its_tool() -> None:
    race = Race(delay=0.5, max_hedges=1, began=10.0)
    race.start()
    assert race.next(10.4, None, False) is Move.WAIT
    # Due from `began`, but the attempt is still waiting for a thread: not slow at the
    # service yet, so it is looked at again one delay later.
    assert race.next(10.6, None, False) is Move.WAIT and race.due == pytest.approx(11.1)
    assert race.next(10.7, 10.65, False) is Move.WAIT  # it reached its tool at 10.65 ...
    assert race.due == pytest.approx(11.15)  # ... so the hedge is due at 10.65 + 0.5
    assert race.next(11.1, 10.65, False) is Move.WAIT
    assert race.next(11.15, 10.65, False) is Move.HEDGE


def test_no_hedge_for_an_attempt_whose_tool_has_answered() -> None:
    """The tool returned, its answer is on its way back to the race (a thread that has
    not been scheduled yet): no hedge, the answer is looked for again."""
    race = Race(delay=0.5, max_hedges=1, began=0.0)
    race.start()
    assert race.next(0.6, 0.0, True) is Move.WAIT and race.due == pytest.approx(1.1)
    race.won(0, "a")
    assert race.next(0.7, 0.0, True) is Move.DONE and race.hedges_sent == 0


# -- the probe -----------------------------------------------------------------------------


def test_the_probe_stamps_the_tools_own_time() -> None:
    clock = FakeClock()
    probe = Probe(clock)
    assert probe.service_s is None
    clock.advance(5.0)  # waiting for a thread: not counted

    def tool() -> str:
        clock.advance(SERVICE_S)
        return "ok"

    assert probe.run(tool) == "ok"
    clock.advance(5.0)  # the answer on its way back: not counted either
    assert probe.service_s == pytest.approx(SERVICE_S)


def test_a_superseded_attempt_that_has_not_begun_never_runs() -> None:
    probe = Probe(FakeClock())
    ended: list[str] = []
    assert probe.supersede(lambda: ended.append("x")) is False  # not begun: nothing to count
    ran: list[str] = []
    with pytest.raises(Superseded):
        probe.run(lambda: ran.append("ran"))
    assert ran == [] and ended == []


def test_a_superseded_attempt_that_runs_says_when_it_lets_go() -> None:
    probe = Probe(FakeClock())
    ended: list[str] = []
    inside = threading.Event()
    go = threading.Event()

    def tool() -> str:
        inside.set()
        assert go.wait(10)
        return "late"

    worker = threading.Thread(target=probe.run, args=(tool,))
    worker.start()
    assert inside.wait(10)
    assert probe.supersede(lambda: ended.append(threading.current_thread().name)) is True
    assert ended == []  # still holds its thread
    go.set()
    worker.join(10)
    assert ended == [worker.name]  # told once, on the thread that ran it
    assert probe.supersede(lambda: ended.append("again")) is False  # already ended


# -- through the adapters ----------------------------------------------------------------


def test_the_auto_delay_is_learned_from_the_tools_own_time(harness: Harness) -> None:
    """Each first attempt waits `TOKEN_WAIT_S` for a token, then the tool takes
    `SERVICE_S`: the latencies learned are the tool's, so the delay is 1.25 x 20 ms, not
    1.25 x 1.02 s (which, on a busy machine, is how a delay grew past the stall it was for)."""
    clock = FakeClock()

    def search_docs(query: str) -> str:
        clock.advance(SERVICE_S)
        return f"fresh {query}"

    limiter = SlowTokens(clock)
    policy = _policy(
        clock, hedge=Hedge(delay="auto", min_delay=0.001), limits=Limits(rate_limit=limiter)
    )
    turns = [
        [tool_call("search_docs", {"query": f"w{i}"}, id=f"w{i}")] for i in range(AUTO_MIN_SAMPLES)
    ]
    harness.run_turns([counted("search_docs", search_docs)], turns, policy=policy)
    learned = hedge_stage(harness).histories.peek("search_docs")
    assert learned is not None
    assert learned.snapshot() == pytest.approx([SERVICE_S] * AUTO_MIN_SAMPLES)
    assert limiter.acquired == AUTO_MIN_SAMPLES and CALLS["search_docs"] == AUTO_MIN_SAMPLES
    assert harness.stats()["search_docs"]["hedges"] == 0


def test_waiting_for_a_token_is_not_being_slow(harness: Harness) -> None:
    """The first attempt waits twice the hedge delay for its token, then answers at
    once: it was never slow at the service, so no hedge goes beside it."""
    clock = FakeClock()

    def search_docs(query: str) -> str:
        clock.advance(SERVICE_S)
        return f"fresh {query}"

    policy = _policy(clock, limits=Limits(rate_limit=SlowTokens(clock)))
    calls = [tool_call("search_docs", {"query": f"q{i}"}, id=f"c{i}") for i in range(3)]
    result = harness.run([counted("search_docs", search_docs)], calls, policy=policy)
    assert [result[f"c{i}"].content for i in range(3)] == ["fresh q0", "fresh q1", "fresh q2"]
    assert CALLS["search_docs"] == 3 and harness.stats()["search_docs"]["hedges"] == 0


def test_a_loser_is_counted_by_the_thread_it_holds(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync tool's losing attempt holds its thread after the step: counted (no hedge
    once the tool's cap is reached) until the tool lets go, and no longer, in the same
    thread, without another step. (Counted by a task of the step's private loop, a loser
    stayed counted until that thread ran a step again: a thread per request never did,
    and after four such losers the tool was never hedged again.)"""
    clock = FakeClock()
    release = harness.hang_event()
    seen: dict[str, int] = defaultdict(int)

    def search_docs(query: str) -> str:
        seen[query] += 1
        if query == "slow" and seen[query] == 1:
            clock.advance(10.0)
            assert release.wait(30)
            return "late"
        return f"fresh {query}"

    released = threading.Event()
    let_go = HedgeStage._released

    def spy(self: HedgeStage, tool: str) -> None:
        let_go(self, tool)
        released.set()

    monkeypatch.setattr(HedgeStage, "_released", spy)
    calls = [tool_call("search_docs", {"query": q}, id=q) for q in ("slow", "fast")]
    result = harness.run([counted("search_docs", search_docs)], calls, policy=_policy(clock))
    assert result["slow"].content == "fresh slow" and result["fast"].content == "fresh fast"
    stage = hedge_stage(harness)
    assert stage.losers("search_docs") == 1
    release.set()
    assert released.wait(30)
    assert stage.losers("search_docs") == 0


def test_a_loser_still_on_its_way_never_runs(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hedge is held on its way to the tool (here: its token) while the first attempt
    answers: the race is decided, and the hedge, once let go, does not run the tool."""
    if harness.mode == "async":
        pytest.skip("the held token would block the event loop the race runs on")
    clock = FakeClock()
    limiter = SlowTokens(clock, hold=2)  # the second acquire is the hedge's

    def search_docs(query: str) -> str:
        clock.advance(10.0)  # a straggler: the hedge is due ...
        assert limiter.holding.wait(30)  # ... and sent; it waits for its token
        return f"late {query}"

    superseded = threading.Event()
    failed = HedgeStage._failed

    def spy(self: HedgeStage, call: Any, exc: BaseException) -> None:
        failed(self, call, exc)
        if isinstance(exc, Superseded):
            superseded.set()

    monkeypatch.setattr(HedgeStage, "_failed", spy)
    policy = _policy(clock, limits=Limits(rate_limit=limiter))
    result = harness.run(
        [counted("search_docs", search_docs)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    assert result["c1"].content == "late q"
    limiter.held.set()  # the hedge goes on to its tool, after the race
    assert superseded.wait(30)
    assert CALLS["search_docs"] == 1  # the tool ran once: the hedge never reached it
    assert harness.stats()["search_docs"]["hedges"] == 1  # sent, and counted as sent


def test_an_answer_on_its_way_when_the_hedge_comes_due_is_not_hedged(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy loop the hedge's timer and the first attempt's answer come due in the
    same turn: the answer still has turns to go (LangChain runs the tool's coroutine as
    a task of its own), and a hedge sent at once would be spent on an attempt that has
    answered. The race lets its answer through first (`SETTLE_HOPS` turns), then looks.
    (Here the race looks at every turn of the loop, and the answer and the delay's end
    come in one callback.)"""
    if harness.mode == "sync":
        pytest.skip("an async race: a sync attempt's answer comes from its thread")
    monkeypatch.setattr(logic, "POLL_S", 0.0)
    clock = FakeClock()

    async def aread(query: str) -> str:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str] = loop.create_future()

        def due_and_answered() -> None:
            clock.advance(10.0)  # far past the delay ...
            answer.set_result(f"fresh {query}")  # ... and the answer on its way

        loop.call_soon(due_and_answered)
        return await answer

    tool = counted("search_docs", lambda query: f"fresh {query}", coroutine=aread)
    policy = ToolPolicy(hedge=Hedge(delay=0.5, budget=1.0), clock=clock, dedup="off")
    result = harness.run([tool], [tool_call("search_docs", {"query": "q"}, id="c1")], policy=policy)
    assert result["c1"].content == "fresh q"
    assert CALLS["search_docs"] == 1
    assert harness.stats()["search_docs"]["hedges"] == 0
