"""Hedged reads: a slow attempt of an idempotent call gets a second one beside it.

Time is the injected `FakeClock`: a stalling tool moves it past the hedge delay and then
blocks (on an event the test releases, or until it is cancelled), so whether a hedge
goes never depends on real time. `hedge_spy` releases a stalled first attempt as soon
as the hedge stage has decided not to hedge, or a hedge failed (not sent).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from langchain_core.tools import InjectedToolArg, StructuredTool

from langchain_resilient_tools import (
    BreakerPolicy,
    Hedge,
    IgnoredOptionWarning,
    Limits,
    ResilientToolNode,
    RetryPolicy,
    Timeouts,
    ToolPolicy,
)
from langchain_resilient_tools.core.errors import AttemptTimeout, CircuitOpen, ToolRaised
from langchain_resilient_tools.core.policy import PolicyResolver, overlay
from langchain_resilient_tools.pipeline.driver import STAGES
from langchain_resilient_tools.pipeline.hedge.budget import BURST, HedgeBudget
from langchain_resilient_tools.pipeline.hedge.logic import (
    AUTO_MIN_SAMPLES,
    Race,
    auto_delay,
    hedge_delay,
    history_for,
    why_not,
)
from langchain_resilient_tools.pipeline.hedge.stage import HedgeStage
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import CALLS, counted

STALL_S = 10.0
"""How far a stalling attempt moves the fake clock (far past any hedge delay here)."""


class Releases:
    """One event per query: a stalled first attempt of that query waits on it."""

    def __init__(self, harness: Harness) -> None:
        self._events: dict[str, threading.Event] = defaultdict(harness.hang_event)
        self._lock = threading.Lock()

    def __getitem__(self, query: str) -> threading.Event:
        with self._lock:
            return self._events[query]

    def release(self, query: str) -> None:
        self[query].set()


@pytest.fixture
def releases(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[Releases]:
    """Releases a stalled first attempt once the hedge stage decided against a hedge,
    or an attempt beside it failed (a hedge not sent for want of a slot or token)."""
    found = Releases(harness)
    may_hedge, failed = HedgeStage._may_hedge, HedgeStage._failed

    def spy_may(self: HedgeStage, call: Any) -> bool:
        ok = may_hedge(self, call)
        if not ok:
            found.release(call.args.get("query", ""))
        return ok

    def spy_failed(self: HedgeStage, call: Any, exc: BaseException) -> None:
        failed(self, call, exc)
        found.release(call.args.get("query", ""))

    monkeypatch.setattr(HedgeStage, "_may_hedge", spy_may)
    monkeypatch.setattr(HedgeStage, "_failed", spy_failed)
    yield found


def stalling_read(
    name: str,
    clock: FakeClock,
    releases: Releases,
    *,
    stall: Any = lambda query, n: n == 1,
    loser_done: threading.Event | None = None,
    cancelled: list[str] | None = None,
    native_async: bool = False,
    stall_s: float = STALL_S,
) -> Any:
    """A read whose n-th execution of a query stalls when `stall(query, n)`: it moves the
    fake clock by `stall_s` and waits for its release (sync), or until it is cancelled
    (`native_async`). Any other execution answers ``fresh <query>`` at once; a stalled
    one, once released, answers ``late <query>``."""
    seen: dict[str, int] = defaultdict(int)
    lock = threading.Lock()

    def count(query: str) -> int:
        with lock:
            seen[query] += 1
            return seen[query]

    def read(query: str) -> str:
        if stall(query, count(query)):
            clock.advance(stall_s)
            releases[query].wait(30)
            if loser_done is not None:
                loser_done.set()
            return f"late {query}"
        return f"fresh {query}"

    async def aread(query: str) -> str:
        if stall(query, count(query)):
            clock.advance(stall_s)
            try:
                await asyncio.get_running_loop().create_future()  # until cancelled
            except asyncio.CancelledError:
                if cancelled is not None:
                    cancelled.append(query)
                raise
        return f"fresh {query}"

    return counted(name, read, coroutine=aread if native_async else None)


def record_of(message: Any) -> dict[str, Any]:
    return dict(message.response_metadata.get("resilience") or {})


def _policy(clock: FakeClock, **fields: Any) -> ToolPolicy:
    # A budget of one hedge per call: these tests are about the race, not the budget.
    base = ToolPolicy(hedge=Hedge(delay=0.5, budget=1.0), clock=clock, dedup="off")
    return overlay(base, ToolPolicy(**fields))  # group by group, as a per-tool policy


# -- the order and the pure decisions ---------------------------------------------------


def test_hedge_sits_between_retry_and_breaker() -> None:
    names = [s.name for s in STAGES]
    assert names.index("retry") + 1 == names.index("hedge") == names.index("breaker") - 1


def test_policy_validation() -> None:
    assert ToolPolicy().hedge is None
    assert ToolPolicy(hedge="auto").hedge == Hedge(delay="auto")
    for bad in (0, -1.0, "fast", True):
        with pytest.raises(ValueError):
            ToolPolicy(hedge=bad)
    with pytest.raises(ValueError):
        ToolPolicy(hedge=Hedge(delay=1.0, max_hedges=0))
    with pytest.raises(ValueError):
        ToolPolicy(hedge=Hedge(delay=1.0, budget=1.5))


def _latencies(n: int, *, stalls: int = 0) -> list[float]:
    """`n` ordinary latencies from 0.09 to 0.11 s, the first `stalls` of them 2 s."""
    return [2.0 if i < stalls else 0.09 + 0.02 * i / n for i in range(n)]


def test_auto_does_not_hedge_until_latencies_are_known() -> None:
    policy = ToolPolicy(hedge=Hedge(delay="auto", min_delay=0.05))
    assert policy.hedge is not None
    history = history_for(policy)
    assert hedge_delay(policy.hedge, history) is None  # no floor guessed in advance
    for _ in range(AUTO_MIN_SAMPLES - 1):
        history.add(0.1)
    assert hedge_delay(policy.hedge, history) is None
    history.add(0.1)
    assert hedge_delay(policy.hedge, history) == pytest.approx(0.125)
    assert hedge_delay(Hedge(delay=0.3), None) == 0.3


def test_auto_delay_is_past_the_p95_of_the_ordinary_answers() -> None:
    samples = _latencies(200, stalls=6)  # 3% stall: the p95 is an ordinary answer
    p95 = sorted(samples)[189]
    assert p95 < 0.11
    assert auto_delay(samples, 0.01) == pytest.approx(1.25 * p95)


def test_auto_delay_is_not_set_by_the_stalls_themselves() -> None:
    """Two stalls among the first ten latencies: the p95 is a stall, the cap (twice the
    p75) keeps the delay among the ordinary answers."""
    samples = _latencies(10, stalls=2)
    assert sorted(samples)[9] == 2.0
    delay = auto_delay(samples, 0.01)
    assert delay is not None and delay < 0.25
    assert delay == pytest.approx(2 * sorted(samples)[7])
    slow = _latencies(100, stalls=30)  # most calls stall: the cap moves too
    assert auto_delay(slow, 0.01) == pytest.approx(2.5)  # 1.25 x p95, not hedged early


def test_auto_delay_bounds() -> None:
    assert auto_delay([0.001] * 50, 0.05) == 0.05  # never below the floor
    assert auto_delay([100.0] * 50, 0.05) == 60.0  # nor above the longest delay
    assert auto_delay([0.1] * (AUTO_MIN_SAMPLES - 1), 0.05) is None


def test_no_hedge_past_the_deadline_rate_limited_open_circuit_or_threads() -> None:
    ok = {"deadline_left": 1.0, "quiet_until": 0.0, "now": 5.0, "circuit_closed": True,
          "abandoned": 0, "max_abandoned": 4}  # fmt: skip
    assert why_not(**ok) is None
    assert why_not(**{**ok, "deadline_left": 0.0}) == "deadline"
    assert why_not(**{**ok, "quiet_until": 6.0}) == "rate_limited"
    assert why_not(**{**ok, "circuit_closed": False}) == "circuit_open"
    assert why_not(**{**ok, "abandoned": 4}) == "threads"


def test_race_first_good_answer_wins_and_fails_only_when_all_failed() -> None:
    race = Race()
    race.start(), race.start()
    race.lost(1, ToolRaised(ConnectionError("down")))
    assert not race.decided  # a hedge failed, the first attempt still runs
    assert race.won(0, "a")
    assert race.outcome() == "a" and race.hedges_sent == 1
    assert not race.won(1, "b")  # late: changes nothing
    race = Race()
    race.start(), race.start()
    race.lost(1, AttemptTimeout(0.0, started=False))  # a hedge not sent
    race.lost(0, ToolRaised(ConnectionError("down")))
    assert race.decided and race.hedges_sent == 0
    with pytest.raises(ToolRaised):
        race.outcome()  # the first attempt's failure
    race = Race()
    race.start()
    race.lost(0, CircuitOpen(1.0))
    with pytest.raises(CircuitOpen):
        race.outcome()


def test_the_budget_starts_empty_and_saves_up_a_burst() -> None:
    """No hedge is lent in advance: the first token comes with the 20th call, and a
    tool healthy for a while has saved up to `BURST` hedges for stalls in a row."""
    budget = HedgeBudget(ratio=0.05)
    assert not budget.try_spend()
    for _ in range(19):
        budget.record_call()
    assert not budget.try_spend()
    budget.record_call()
    assert budget.try_spend() and not budget.try_spend()
    for _ in range(10_000):  # healthy: nothing hedged, the bucket fills up to its burst
        budget.record_call()
    assert budget.tokens == BURST
    assert sum(budget.try_spend() for _ in range(3 * BURST)) == BURST
    granted = 0
    for _ in range(1000):  # then every call wants a hedge (a service slow for everyone)
        budget.record_call()
        granted += budget.try_spend()
    assert granted == 50  # one per twenty calls, whatever the float rounding


def test_the_burst_is_counted_inside_the_share_over_any_run() -> None:
    """Whatever the mix of calls and hedge wishes, from the first call on: hedges stay
    within 5% of the calls, bursts included (`Hedge.burst` is saved up, not lent)."""
    for burst in (1, BURST, 50):
        budget = HedgeBudget(ratio=0.05, burst=burst)
        hedges = 0
        for calls, i in enumerate(range(5000), start=1):
            budget.record_call()
            wishes = 5 if i % 7 == 0 else int(i % 3 == 0)  # bursts and lulls
            if 1000 <= i < 1500:
                wishes = 0  # a quiet stretch: the bucket fills to its burst ...
            for _ in range(wishes):  # ... and the next bunch of stalls spends it at once
                hedges += budget.try_spend()
            assert hedges == budget.spent <= 0.05 * calls + 1e-9
        if burst >= BURST:  # the share is there to be used: all but what the quiet
            # stretch (25 tokens) saved beyond the burst
            assert budget.spent >= 0.05 * 5000 - max(0, 25 - burst) - 1


def test_a_token_is_given_back_when_the_retry_budget_refuses() -> None:
    budget = HedgeBudget(ratio=0.5, burst=2)
    budget.record_call(), budget.record_call()
    assert budget.try_spend()
    budget.give_back()
    assert (budget.tokens, budget.spent) == (1.0, 0)


# -- through the adapters ---------------------------------------------------------------


def test_a_straggler_is_answered_by_the_hedge(harness: Harness, releases: Releases) -> None:
    clock = FakeClock()
    cancelled: list[str] = []
    tool = stalling_read("search_docs", clock, releases, cancelled=cancelled, native_async=True)
    result = harness.run(
        [tool], [tool_call("search_docs", {"query": "q"}, id="c1")], policy=_policy(clock)
    )
    assert result["c1"].content == "fresh q"
    record = record_of(result["c1"])
    assert record["hedges"] == 1 and record["hedge_won"] is True and record["attempts"] == 2
    assert CALLS["search_docs"] == 2
    row = harness.stats()["search_docs"]
    assert (row["calls"], row["hedges"], row["hedge_wins"], row["retries"]) == (1, 1, 1, 0)
    if harness.mode == "async":
        assert cancelled == ["q"]  # the loser was cancelled, not left to run


def test_an_async_only_tools_loser_is_cancelled_from_sync_code_too(
    harness: Harness, releases: Releases
) -> None:
    """An async-only tool (an MCP tool, for one) called from sync code runs its coroutine
    on a loop of ours: a losing attempt is cancelled there too, as on the caller's own
    loop, not left to run until its timeout (holding two threads, and its request at the
    service). Its cancellation is no failure of the service: a breaker that opens at the
    first failure stays closed."""
    clock = FakeClock()
    cancelled: list[str] = []
    stalls = stalling_read(
        "search_docs",
        clock,
        releases,
        stall=lambda query, n: query == "q" and n == 1,
        cancelled=cancelled,
        native_async=True,
    )
    tool = StructuredTool.from_function(
        coroutine=stalls.coroutine, name="search_docs", description="Search the docs."
    )
    policy = _policy(clock, breaker=BreakerPolicy(failure_threshold=1))

    def before(i: int) -> None:
        if i == 1:  # the loser was cancelled (on our loop: just after the answer, in sync code)
            pause = threading.Event()
            for _ in range(1000):
                if cancelled and not hedge_stage(harness).losers("search_docs"):
                    break
                pause.wait(0.01)

    first, second = harness.run_turns(
        [tool],
        [[tool_call("search_docs", {"query": "q"}, id="c1")],
         [tool_call("search_docs", {"query": "r"}, id="c2")]],
        policy=policy,
        before_turn=before,
    )  # fmt: skip
    assert first["c1"].content == "fresh q"
    assert record_of(first["c1"])["hedge_won"] is True
    assert cancelled == ["q"]
    assert second["c2"].content == "fresh r"  # not `circuit_open`
    assert CALLS["search_docs"] == 3


def hedge_stage(harness: Harness) -> HedgeStage:
    """The hedge stage of the one adapter `harness` built last."""
    (adapter,) = harness.adapters
    return next(s for s in adapter.pipeline.stages if isinstance(s, HedgeStage))


def test_a_fast_first_attempt_is_not_hedged(harness: Harness, releases: Releases) -> None:
    clock = FakeClock()
    tool = stalling_read("search_docs", clock, releases, stall=lambda q, n: False)
    result = harness.run(
        [tool], [tool_call("search_docs", {"query": "q"}, id="c1")], policy=_policy(clock)
    )
    assert result["c1"].content == "fresh q"
    assert record_of(result["c1"]) == {}  # a healthy call: ToolNode's own message
    assert CALLS["search_docs"] == 1


def test_the_losers_late_answer_changes_nothing(harness: Harness, releases: Releases) -> None:
    """The straggler answers after the hedge won: the answer, the cache entry and the
    statistics are the hedge's (sync tools: the loser is abandoned and runs out)."""
    clock = FakeClock()
    loser_done = threading.Event()
    tool = stalling_read("search_docs", clock, releases, loser_done=loser_done)
    policy = _policy(clock, cache=600.0)
    call = [tool_call("search_docs", {"query": "q"}, id="c1")]
    again = [tool_call("search_docs", {"query": "q"}, id="c2")]

    def before(i: int) -> None:
        if i == 1:
            releases.release("q")  # the loser answers now ...
            assert loser_done.wait(10)  # ... and is done before the next turn

    first, second = harness.run_turns([tool], [call, again], policy=policy, before_turn=before)
    assert first["c1"].content == "fresh q"
    assert second["c2"].content.endswith("\nfresh q")  # the cache keeps the winner's answer
    assert CALLS["search_docs"] == 2
    row = harness.stats()["search_docs"]
    assert (row["calls"], row["hedges"], row["served_by"]) == (2, 1, {"cache": 1, "tool": 1})


def test_a_write_is_never_hedged(harness: Harness) -> None:
    clock = FakeClock()

    def create_order(query: str) -> str:
        clock.advance(STALL_S)  # slow, but a write: no second execution
        return f"order {query}"

    tool = counted("create_order", create_order)
    calls = [tool_call("create_order", {"query": f"q{i}"}, id=f"c{i}") for i in range(2)]
    # A hedge for every tool: a tool named as a write is not hedged, and that is no
    # surprise (`core.ignored`; a hedge set for the write itself is said, see test_ignored).
    result = harness.run([tool], calls, policy=_policy(clock))
    assert [result[f"c{i}"].content for i in range(2)] == ["order q0", "order q1"]
    assert CALLS["create_order"] == 2
    assert harness.stats()["create_order"]["hedges"] == 0


def test_a_keyed_write_is_never_hedged() -> None:
    """A write the service knows by its idempotency key is retried with it (it counts as
    idempotent), but it is a write: never sent twice at once."""
    from langchain_resilient_tools.pipeline.driver import Pipeline

    def create_order(query: str, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Order."""
        return f"order {query}"

    tool = counted("create_order", create_order)
    pipeline = Pipeline(PolicyResolver(_policy(FakeClock(), idempotency_key=True)))
    with pytest.warns(IgnoredOptionWarning, match="never applies"):  # said at its first call
        call = pipeline.new_call(call_id="c0", name="create_order", args={"query": "q"}, tool=tool)
    assert call.idempotent and call.resolved.write
    stage = next(s for s in pipeline.stages if isinstance(s, HedgeStage))
    assert stage._hedged(call) is False


def test_the_budget_holds_under_an_outage(harness: Harness, releases: Releases) -> None:
    """Every first attempt is slow: 5% of the calls are hedged, a burst included (the
    bucket saved up by earlier healthy calls, none lent in advance). (The losers hold
    their threads to the end; the thread cap is raised so that only the budget decides.)"""
    clock = FakeClock()
    tool = stalling_read("search_docs", clock, releases, stall_s=0.2)
    steps = 8
    turns = [
        [tool_call("search_docs", {"query": f"s{s}-{i}"}, id=f"s{s}-{i}") for i in range(5)]
        for s in range(steps)
    ]
    hedge = Hedge(delay=0.1, budget=0.05)
    policy = _policy(clock, hedge=hedge, timeouts=Timeouts(max_abandoned_threads=100))
    results = harness.run_turns([tool], turns, policy=policy, thread_per_turn=True)
    answers = [results[s][f"s{s}-{i}"].content for s in range(steps) for i in range(5)]
    queries = [f"s{s}-{i}" for s in range(steps) for i in range(5)]
    assert all(a.endswith(q) for a, q in zip(answers, queries, strict=True)), answers
    row = harness.stats()["search_docs"]
    calls = steps * 5
    assert row["calls"] == calls and row["errors"] == 0
    assert row["hedges"] == int(0.05 * calls)  # a token per twenty calls, spent at once
    assert CALLS["search_docs"] == calls + row["hedges"]


def test_no_hedge_while_the_circuit_is_half_open(harness: Harness, releases: Releases) -> None:
    clock = FakeClock()
    state = {"down": True}

    def search_docs(query: str) -> str:
        if state["down"]:
            raise ConnectionError("down")
        clock.advance(STALL_S)  # the probe is slow
        releases[query].wait(30)
        return f"late {query}"

    tool = counted("search_docs", search_docs)
    policy = _policy(
        clock, breaker=BreakerPolicy(failure_threshold=1, recovery_time=5.0),
        retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    turns = [
        [tool_call("search_docs", {"query": "a"}, id="c0")],  # opens the circuit
        [tool_call("search_docs", {"query": "b"}, id="c1")],  # refused: open
        [tool_call("search_docs", {"query": "c"}, id="c2")],  # the half-open probe
    ]

    def before(i: int) -> None:
        if i == 2:
            clock.advance(6.0)
            state["down"] = False

    results = harness.run_turns([tool], turns, policy=policy, before_turn=before)
    assert json.loads(results[1]["c1"].content)["error"] == "circuit_open"
    assert results[2]["c2"].content == "late c"  # the probe itself: no hedge beside it
    assert CALLS["search_docs"] == 2
    assert harness.stats()["search_docs"]["hedges"] == 0


class RateLimited(Exception):
    status_code = 429


def test_no_hedge_just_after_a_rate_limit(harness: Harness, releases: Releases) -> None:
    clock = FakeClock()
    state = {"limited": True}

    def search_docs(query: str) -> str:
        if state["limited"]:
            state["limited"] = False
            raise RateLimited("slow down")
        clock.advance(1.0)  # slow, but within the quiet time after the 429
        releases[query].wait(30)
        return f"late {query}"

    tool = counted("search_docs", search_docs)
    policy = _policy(clock, retry=RetryPolicy(max_attempts=1))
    turns = [
        [tool_call("search_docs", {"query": "a"}, id="c0")],
        [tool_call("search_docs", {"query": "b"}, id="c1")],
    ]
    results = harness.run_turns([tool], turns, policy=policy)
    assert json.loads(results[0]["c0"].content)["error"] == "rate_limited"
    assert results[1]["c1"].content == "late b"
    assert CALLS["search_docs"] == 2
    assert harness.stats()["search_docs"]["hedges"] == 0


def test_a_hedge_takes_no_slot_that_is_not_free(harness: Harness, releases: Releases) -> None:
    """max_concurrency=1: the slow first attempt holds the slot, so the hedge is not sent."""
    clock = FakeClock()
    tool = stalling_read("search_docs", clock, releases)
    result = harness.run(
        [tool],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=_policy(clock, limits=Limits(max_concurrency=1)),
    )
    assert result["c1"].content == "late q"
    assert CALLS["search_docs"] == 1
    assert harness.stats()["search_docs"]["hedges"] == 0


def test_a_failing_hedge_does_not_end_the_call(harness: Harness, releases: Releases) -> None:
    """The hedge fails while the first attempt runs: the first attempt's answer counts."""
    clock = FakeClock()
    seen: dict[str, int] = defaultdict(int)

    def search_docs(query: str) -> str:
        seen[query] += 1
        if seen[query] == 2:
            raise ConnectionError("the hedge failed")  # releases the first (spy)
        clock.advance(STALL_S)
        releases[query].wait(30)
        return f"late {query}"

    result = harness.run(
        [counted("search_docs", search_docs)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=_policy(clock, retry=RetryPolicy(max_attempts=1)),
    )
    assert result["c1"].content == "late q"
    assert record_of(result["c1"])["hedges"] == 1
    assert record_of(result["c1"])["hedge_won"] is False


def test_when_every_attempt_fails_retry_goes_on(harness: Harness, releases: Releases) -> None:
    """Both attempts of the race fail: one failure for the retry stage, which tries
    again (a new race); the call ends in one answer."""
    clock = FakeClock()
    seen: dict[str, int] = defaultdict(int)

    def search_docs(query: str) -> str:
        seen[query] += 1
        n = seen[query]
        if n == 1:
            clock.advance(STALL_S)
            releases[query].wait(30)
            raise ConnectionError("slow, then down")
        if n == 2:
            raise ConnectionError("the hedge failed")
        return f"fresh {query}"

    result = harness.run(
        [counted("search_docs", search_docs)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=_policy(clock, retry=RetryPolicy(max_attempts=2)),
    )
    assert result["c1"].content == "fresh q"
    record = record_of(result["c1"])
    assert record["attempts"] == 3 and record["hedges"] == 1
    row = harness.stats()["search_docs"]
    assert (row["calls"], row["retries"], row["hedges"]) == (1, 1, 1)


def test_every_failure_path_ends_in_one_answer(harness: Harness, releases: Releases) -> None:
    clock = FakeClock()
    seen: dict[str, int] = defaultdict(int)

    def search_docs(query: str) -> str:
        seen[query] += 1
        if seen[query] == 1:
            clock.advance(STALL_S)
            releases[query].wait(30)
        raise ConnectionError("down")

    calls = [tool_call("search_docs", {"query": f"q{i}"}, id=f"c{i}") for i in range(3)]
    result = harness.run(
        [counted("search_docs", search_docs)],
        calls,
        policy=_policy(clock, retry=RetryPolicy(max_attempts=1)),
    )
    assert set(result.messages) == {"c0", "c1", "c2"}
    for i in range(3):
        assert json.loads(result[f"c{i}"].content)["error"] == "transient_failure"
    if harness.adapter != "tool":  # a plain ToolNode keeps no `tool_errors`
        assert len(result.tool_errors) == 3


def test_auto_learns_the_tools_latency(harness: Harness, releases: Releases) -> None:
    """``hedge="auto"``: after enough fast answers, a straggler is hedged (here at the
    floor, `Hedge.min_delay`, which is above 1.25 x their p95)."""
    clock = FakeClock()
    seen: dict[str, int] = defaultdict(int)

    def search_docs(query: str) -> str:
        seen[query] += 1
        if query == "slow" and seen[query] == 1:
            clock.advance(1.0)  # far past the learned delay (the 50 ms floor)
            releases[query].wait(30)
            return "late"
        clock.advance(0.02)
        return f"fresh {query}"

    tool = counted("search_docs", search_docs)
    policy = _policy(clock, hedge=Hedge(delay="auto", min_delay=0.05, budget=1.0))
    warm = [
        [tool_call("search_docs", {"query": f"w{i}"}, id=f"w{i}")] for i in range(AUTO_MIN_SAMPLES)
    ]
    slow = [[tool_call("search_docs", {"query": "slow"}, id="s")]]
    results = harness.run_turns([tool], [*warm, *slow], policy=policy)
    assert results[-1]["s"].content == "fresh slow"
    assert harness.stats()["search_docs"]["hedges"] == 1


def test_resolver_keeps_hedge_per_tool() -> None:
    resolver = PolicyResolver(
        ToolPolicy(hedge="auto"), {"search_web": ToolPolicy(hedge=None, timeout=5.0)}
    )
    assert resolver.resolve("search_docs").policy.hedge == Hedge(delay="auto")
    assert resolver.resolve("search_web").policy.hedge is None


def test_the_default_policy_leaves_the_hedge_stage_out() -> None:
    """Hedging off (the default): the stage is not in the tool's chain, so it costs
    nothing per call."""
    node = ResilientToolNode([counted("search_docs", lambda query: query)])
    stage = next(s for s in node.pipeline.stages if s.name == "hedge")
    assert not stage.applies(node.pipeline.resolver.resolve("search_docs"))
    assert stage.applies(PolicyResolver(ToolPolicy(hedge="auto"), {}).resolve("search_docs"))


def test_the_race_says_when_each_hedge_is_due() -> None:
    """The core both drivers share: wait until the next hedge is due, then send it."""
    from langchain_resilient_tools.pipeline.hedge.logic import Move

    race = Race(delay=1.0, max_hedges=2, began=10.0)
    race.start()
    assert race.due == 11.0 and race.next(10.5, 10.0, False) is Move.WAIT
    assert race.next(11.0, 10.0, False) is Move.HEDGE  # the first hedge is due
    race.start()
    assert race.due == 12.0 and race.next(11.5, 10.0, False) is Move.WAIT
    assert race.next(30.0, 10.0, False) is Move.HEDGE  # late, but due: the second
    race.start()
    assert (
        race.due is None and race.next(99.0, 10.0, False) is Move.WAIT
    )  # no more: wait for an answer
    race.won(2, "c")
    assert race.next(99.0, 10.0, False) is Move.DONE and race.outcome() == "c"
    held = Race(delay=1.0, max_hedges=3, began=0.0)
    held.start()
    assert held.next(1.0, 0.0, False) is Move.HEDGE
    held.hold()  # it may not go now (budget, circuit ...): none goes later in this race
    assert held.due is None and held.next(5.0, 0.0, False) is Move.WAIT


_LOSER_LEFT = """
import sys, threading
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_resilient_tools import Hedge, ResilientToolNode, ToolPolicy
from langchain_resilient_tools.pipeline.hedge import stage
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.support.graphs import tools_graph

clock, stall, seen = FakeClock(), threading.Event(), []

@tool
def search_docs(query: str) -> str:
    \"\"\"Search.\"\"\"
    seen.append(query)
    if seen.count(query) == 1 and query.startswith("q"):
        clock.advance(10.0)
        stall.wait()  # never released: the loser still holds its thread at exit
    return f"fresh {query}"

policy = ToolPolicy(hedge=Hedge(delay=0.5, budget=1.0), clock=clock, dedup="off")
graph = tools_graph(ResilientToolNode([search_docs], policy=policy))

def step(q):
    calls = [tool_call("search_docs", {"query": x}, id=x) for x in (q, "r" + q)]
    state = graph.invoke({"messages": [AIMessage("", tool_calls=calls)]})
    print(sorted(m.content for m in state["messages"][1:]))

worker = threading.Thread(target=step, args=("q1",))  # its step loop ends with it
worker.start(); worker.join(30)
import gc; gc.collect()
print("left by the thread's step:", sum(not t.done() for t in stage._losers))
step("q2")  # on the main thread: its loser is still pending at exit
"""


def test_a_losing_attempt_left_on_a_sync_steps_loop_ends_quietly() -> None:
    """A sync step of several calls races them on its thread's private loop; a losing
    attempt of a sync tool holds its thread and is left to finish there. When the
    thread ends, its loop's losers are cancelled (none is kept for good); at exit, one
    still pending is not reported as "Task was destroyed but it is pending!"."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _LOSER_LEFT], cwd=root, capture_output=True, text=True,
        timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "['fresh q1', 'fresh rq1']",
        "left by the thread's step: 0",
        "['fresh q2', 'fresh rq2']",
    ]
    assert "destroyed but it is pending" not in done.stderr
