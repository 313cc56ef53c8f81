"""Hedged reads: a slow attempt of an idempotent call gets another one beside it.

When an attempt has been with its tool for the tool's hedge delay without an answer
(`Hedge.delay`: a fixed delay, or ``"auto"``, learned from its recent service times:
`logic.auto_delay`, and no hedge at all until `logic.AUTO_MIN_SAMPLES` are known), one
more attempt of the same call starts (up to `Hedge.max_hedges`); the first good answer is
the call's. The other attempts are cancelled (an async tool; from sync code, an
async-only tool's coroutine on a loop of ours: `core.probe.Probe.cancel_with`), or, when
they hold a thread (a sync tool), left to run out and counted while they run, like the
threads of timed-out attempts: no hedge goes while the tool's abandoned threads and
running losers reach its `Timeouts.max_abandoned_threads`. (Losers are not counted where
the runner counts abandoned threads: a burst of losers must not make the next first
attempts fail fast.) A loser still waiting for its thread never runs. An attempt that
fails while another still runs does not end the call: the race fails only when every
attempt failed, with the first attempt's failure.

Time is the service's, not the machine's: each attempt carries a `core.probe.Probe` that
the attempt stage runs the tool through, on the thread that runs it, so the delay is
learned from how long the tool took (not the wait for a worker thread, nor for the caller
to wake up), and counted from when the first attempt reached its tool. On a busy machine
those waits grow with the load; learned from wall time, the delay grew with them until
the hedge came after the straggler's own answer. A loser is counted by the thread it
holds (the probe says when it lets go), not by a task of a loop that may not run again.

Where the stage sits (`driver.STAGES`: retry > hedge > breaker > checks > limit >
attempt), and why:

- inside retry: one race is one try of the retry loop. When every attempt of a race
  failed, retry decides as for one failed attempt (its waits, stop, deadline), and
  hedges spend from the same retry budget, so hedges and retries together stay in it.
  Dedup, cache and fallback sit further out still: one logical call keeps one answer,
  one record, one dedup entry and one cache entry however many attempts raced.
- outside the breaker: every attempt, hedges too, is counted by the breaker (a
  straggler that times out is a slow service). A tool whose circuit is open or half-open
  is not hedged (looked at before a hedge goes; the breaker would refuse it anyway).
- outside the result checks: a useless result fails its own attempt, not the race, so
  another attempt still running may give a good one.
- outside the limits: each attempt takes its own slot and rate-limit token. A hedge
  never waits for one (`pipeline.limit`): with none free at once it is not sent, since a
  hedge is only worth sending into spare capacity.
- outside the attempt: each attempt has its own timeout, capped by the call's deadline.

No hedge goes once the run is asked to drain (`runtime.drain`: the attempt already
running is the race), when the call's deadline has passed, when the tool was just told
``rate_limited`` (for the wait the service asked for, else `RATE_LIMIT_QUIET_S`), when
its circuit is not closed, when it holds its cap of abandoned threads, or when the hedge
budget (`budget.HedgeBudget`: a bucket of at most `Hedge.burst` tokens, empty at first,
that each first attempt adds `Hedge.budget` of a token to) or the retry budget is spent.
A write is never hedged: `hedge` on a tool that is not idempotent is ignored, and said
once by its adapter (`core.ignored`).

One core decides, two thin drivers wait and run: both ask the call's `logic.Race` what
to do next (`Race.next`: wait, send the hedge now due, or stop) and hand it each
attempt's end. The sync driver runs every attempt of a race on the dispatch pool's
threads (the caller only waits for the first good answer); the async driver runs each as
a task, and sends a hedge from the loop callback of its timer, without waking its own task
first: on a busy loop each turn comes late, and the hedge reached its tool one turn
sooner. Before it goes, the race lets `SETTLE_HOPS` turns pass: an answer may be on its
way (LangChain runs a tool's coroutine as a task of its own, so its answer reaches the
race turns after the tool ended), and in a contended run half the hedges went to
attempts that answered a millisecond after them.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from ...core.call import Call
from ...core.errors import ToolRaised
from ...core.hints import is_rate_limited, retry_after
from ...core.policy import Hedge, ResolvedPolicy
from ...core.probe import Probe
from ...core.tools import has_native_async
from ...runtime import deadline as _deadline
from ...runtime import drain as _drain
from ...runtime.adaptive import LatencyHistory
from ...runtime.executor import dispatch_pool
from ...state.pertool import PerTool
from ..stage import AsyncNext, Env, Next, Stage
from .budget import HedgeBudget
from .logic import (
    RATE_LIMIT_QUIET_S,
    Move,
    Race,
    hedge_delay,
    history_for,
    real_wait,
    why_not,
)

log = logging.getLogger(__name__)

SETTLE_HOPS = 3
"""Turns of the event loop an async race lets pass, once a hedge is due, before it looks
whether the first attempt answered: an async tool's answer reaches the race three turns
after the tool's own wait ended (its task, LangChain's task around it, the attempt), and
on a busy loop the hedge's timer and that wait end in the same turn. Each turn costs a
hedge the time the loop takes for one round of its other work."""

_losers: set[asyncio.Task[Any]] = set()
"""Cancelled losing attempts not yet finished (the loop keeps only weak references)."""


def _forget(task: asyncio.Task[Any]) -> None:
    _losers.discard(task)
    if not task.cancelled():
        task.exception()  # read, so that asyncio does not log it as never retrieved


def _idle() -> None:
    """What a finished race's timer callback becomes (`HedgeStage._arace`)."""


def _ask(race: Race, clock: Callable[[], float], first: Probe) -> Move:
    """The race's next move now, told where its first attempt is (`core.probe`)."""
    return race.next(clock(), first.started, first.ended is not None)


def _options(call: Call) -> Hedge:
    hedge = call.resolved.policy.hedge
    assert hedge is not None, "the stage applies to hedged tools only"
    return hedge


class HedgeStage(Stage):
    name = "hedge"
    settle_hops = SETTLE_HOPS

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.histories: PerTool[LatencyHistory] = PerTool()
        self.budgets: PerTool[HedgeBudget] = PerTool()
        self._quiet: dict[str, float] = {}
        """Per tool: the `clock` time until which it is not hedged (it was rate limited)."""
        self._running_losers: dict[str, int] = {}
        """Per tool: losing attempts still running on a thread (sync tools)."""
        self._lock = threading.Lock()

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return resolved.policy.hedge is not None

    # -- decisions around the race -------------------------------------------------

    @staticmethod
    def _hedged(call: Call) -> bool:
        """Whether `call` races at all: never a write, keyed writes included (a hedge set
        for one is said once by its adapter, `core.ignored`)."""
        return not call.resolved.write

    def _history(self, call: Call) -> LatencyHistory | None:
        policy = call.resolved.policy
        if policy.hedge is None or policy.hedge.delay != "auto":
            return None
        return self.histories.get(call.name, lambda: history_for(policy))

    def budget_for(self, call: Call) -> HedgeBudget:
        """The tool's hedge budget: a bucket of `Hedge.burst` tokens at most, empty at
        first, `Hedge.budget` of a token more per first attempt."""
        options = _options(call)
        make = partial(HedgeBudget, ratio=options.budget, burst=options.burst)
        return self.budgets.get(call.name, make)

    def _may_hedge(self, call: Call) -> bool:
        """Whether a hedge may go now; takes it from the budgets when it may."""
        if _drain.draining(call):  # the run is stopping: the attempts running finish
            return False
        policy = call.resolved.policy
        refused = why_not(
            deadline_left=_deadline.remaining(call),
            quiet_until=self._quiet.get(call.name, float("-inf")),
            now=policy.clock(),
            circuit_closed=self.env.circuit_closed(call.name),
            abandoned=self.env.runner.abandoned(call.name) + self.losers(call.name),
            max_abandoned=policy.timeouts.max_abandoned_threads,
        )
        budget = self.budget_for(call)
        if refused is not None or not budget.try_spend():
            return False
        retries = self.env.retry_budget(call)  # the retry stage's: hedges spend from it
        if retries is None or retries.try_spend():
            return True
        budget.give_back()
        return False

    def losers(self, tool: str) -> int:
        """Losing attempts of `tool` still running on a thread."""
        return self._running_losers.get(tool, 0)

    def _let_go(self, tool: str, probe: Probe) -> None:
        """A loser that holds a thread: counted until its tool lets go of it (one still
        waiting for a thread never runs, `Probe.supersede`)."""
        with self._lock:
            self._running_losers[tool] = self.losers(tool) + 1
        if not probe.supersede(partial(self._released, tool)):
            self._released(tool)

    def _released(self, tool: str) -> None:
        with self._lock:
            left = self.losers(tool) - 1
            if left > 0:
                self._running_losers[tool] = left
            else:
                self._running_losers.pop(tool, None)

    @staticmethod
    def _answered(history: LatencyHistory | None, probe: Probe, wall: float) -> None:
        """Learn an attempt's latency: the tool's own time where the probe saw it run,
        else the attempt's `wall` time."""
        if history is not None:
            service = probe.service_s
            history.add(wall if service is None else service)

    def _failed(self, call: Call, exc: BaseException) -> None:
        """Note a rate-limit answer: the tool is not hedged for a while."""
        if isinstance(exc, ToolRaised) and is_rate_limited(exc.original):
            quiet = retry_after(exc.original) or RATE_LIMIT_QUIET_S
            self._quiet[call.name] = call.resolved.policy.clock() + quiet

    @staticmethod
    def _attempt_of(call: Call, n: int) -> tuple[Call, Probe]:
        """Attempt `n` of `call`'s race, and the probe it carries (the first attempt is
        the call itself: what the inner stages note on it stays the call's)."""
        probe = Probe(call.resolved.policy.clock)
        if n == 0:
            call.probe = probe
            return call, probe
        return dataclasses.replace(call, hedge=n, probe=probe), probe

    def _enter(self, call: Call) -> tuple[Race | None, LatencyHistory | None]:
        """The call's race (`None`: one attempt alone, ``"auto"`` still learning the
        tool's latency) and the tool's latency history; the call is counted in the
        hedge budget."""
        history = self._history(call)
        options = _options(call)
        delay = hedge_delay(options, history)
        self.budget_for(call).record_call()
        if delay is None:
            return None, history
        began = call.resolved.policy.clock()
        return Race(delay=delay, max_hedges=options.max_hedges, began=began), history

    @staticmethod
    def _close(call: Call, race: Race) -> None:
        call.record.hedges += race.hedges_sent
        if race.winner is not None:
            call.record.hedge_won = race.winner > 0
            call.record.hedge_winner = race.winner

    # -- the sync driver -----------------------------------------------------------

    def _attempt(
        self,
        call: Call,
        attempt: tuple[Call, Probe],
        call_next: Next,
        history: LatencyHistory | None,
    ) -> Any:
        """One attempt, timed: its latency is learned, a rate-limit answer noted."""
        clock = call.resolved.policy.clock
        start = clock()
        try:
            value = call_next(attempt[0])
        except BaseException as exc:
            self._failed(call, exc)
            raise
        self._answered(history, attempt[1], clock() - start)
        return value

    def wrap(self, call: Call, call_next: Next) -> Any:
        if not self._hedged(call):
            return call_next(call)
        race, history = self._enter(call)
        if race is None:
            return self._attempt(call, self._attempt_of(call, 0), call_next, history)
        clock = call.resolved.policy.clock
        cond = threading.Condition(threading.Lock())
        probes: list[Probe] = []

        def one(n: int, attempt: tuple[Call, Probe]) -> None:
            try:
                value = self._attempt(call, attempt, call_next, history)
            except BaseException as exc:  # handed to the race, which decides
                with cond:
                    race.lost(n, exc)
                    cond.notify_all()
                return
            with cond:
                race.won(n, value)
                cond.notify_all()

        def launch() -> None:  # under `cond`
            n = race.start()
            ctx = contextvars.copy_context()
            attempt = self._attempt_of(call, n)
            probes.append(attempt[1])
            dispatch_pool().submit(lambda: ctx.run(one, n, attempt))

        with cond:
            launch()
            while (move := _ask(race, clock, probes[0])) is not Move.DONE:
                if move is Move.WAIT:
                    cond.wait(real_wait(clock, race.due))
                elif self._may_hedge(call):
                    launch()
                else:
                    race.hold()
            for n, probe in enumerate(probes):
                if n != race.winner and probe.ended is None:
                    self._let_go(call.name, probe)  # a loser, running or not yet begun
            self._close(call, race)
        return race.outcome()

    # -- the async driver ----------------------------------------------------------

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        if not self._hedged(call):
            return call_next(call)
        return self._arace(call, call_next)

    async def _aattempt(
        self,
        call: Call,
        attempt: tuple[Call, Probe],
        call_next: AsyncNext,
        history: LatencyHistory | None,
    ) -> Any:
        """`_attempt`, on the event loop (a cancelled attempt notes nothing)."""
        clock = call.resolved.policy.clock
        start = clock()
        try:
            value = await call_next(attempt[0])
        except Exception as exc:
            self._failed(call, exc)
            raise
        self._answered(history, attempt[1], clock() - start)
        return value

    async def _arace(self, call: Call, call_next: AsyncNext) -> Any:
        race, history = self._enter(call)
        if race is None:
            return await self._aattempt(call, self._attempt_of(call, 0), call_next, history)
        clock = call.resolved.policy.clock
        loop = asyncio.get_running_loop()
        live: dict[asyncio.Task[Any], int] = {}
        probes: list[Probe] = []
        decided: asyncio.Future[None] = loop.create_future()
        timer: asyncio.Handle | None = None

        async def attempt(n: int, one: tuple[Call, Probe]) -> None:
            # Each attempt tells the race its end from its own task: the race wakes one
            # loop turn after the answer, not two (a task's done callbacks take a turn).
            try:
                value = await self._aattempt(call, one, call_next, history)
            except BaseException as exc:  # handed to the race, which decides
                race.lost(n, exc)
            else:
                race.won(n, value)
            if race.decided and not decided.done():
                decided.set_result(None)

        def launch() -> None:
            n = race.start()
            one = self._attempt_of(call, n)
            probes.append(one[1])
            task = loop.create_task(attempt(n, one))
            live[task] = n
            task.add_done_callback(lambda t: live.pop(t, None))

        hops = 0

        def due() -> None:
            # The timer's own callback sends the hedge (no turn for the race's task to
            # wake first), once `SETTLE_HOPS` turns let an answer on its way through.
            nonlocal timer, hops
            timer = None
            at = race.due
            if at is not None and clock() >= at and hops < settle:
                hops += 1
                timer = loop.call_soon(due)
                return
            hops = 0
            move = _ask(race, clock, probes[0])
            if move is Move.HEDGE:
                if self._may_hedge(call):
                    launch()
                else:
                    race.hold()
            elif move is Move.DONE:
                return
            wait = real_wait(clock, race.due)
            if wait is not None:
                timer = loop.call_later(wait, due)

        # A sync tool runs on a worker thread (offloaded here, or by the adapter's
        # stand-in tool): a losing attempt is counted until it lets go of the thread.
        holds_thread = call.offload or (call.tool is not None and not has_native_async(call.tool))
        # Its answer is stamped on its thread (`Probe.run`): the race sees it at once.
        settle = 0 if holds_thread else self.settle_hops
        launch()
        # At least one turn of the loop before the first look: the attempt just started
        # runs up to its first await (and reaches its tool) before a hedge is due.
        timer = loop.call_later(real_wait(clock, race.due) or 0.0, due)
        try:
            await decided
        finally:
            if timer is not None:
                timer.cancel()
            due = _idle  # it named itself (for its own timer): freed now, not collected
            for task, n in live.items():  # the losers (or all, when the caller is cancelled)
                if task.done():  # an attempt that ended (its callback has not run yet)
                    continue
                _losers.add(task)
                task.add_done_callback(_forget)
                if holds_thread:  # a sync tool's thread cannot be stopped: it runs out
                    self._let_go(call.name, probes[n])
                else:
                    task.cancel()
        self._close(call, race)
        return race.outcome()
