"""Hedged reads: a slow attempt of an idempotent call gets another one beside it.

When an attempt has not answered after the tool's hedge delay (`Hedge.delay`: a
fixed delay, or ``"auto"``, learned from its recent latencies: `logic.auto_delay`, and
no hedge at all until `logic.AUTO_MIN_SAMPLES` are known), one more attempt of the same call
starts (up to `Hedge.max_hedges`); the first good answer is the call's. The other
attempts are cancelled (an async tool), or, when they hold a thread (a sync tool), left
to run out and counted while they run, like the threads of timed-out attempts: no hedge
goes while the tool's abandoned threads and running losers reach its
`Timeouts.max_abandoned_threads`. (Losers are not counted where the runner counts abandoned
threads: a burst of losers must not make the next first attempts fail fast.) An
attempt that fails while another still runs does not end the call: the race fails only
when every attempt failed, with the first attempt's failure.

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
budget (`budget.HedgeBudget`: a bucket of `budget.BURST` tokens that each first attempt
adds `Hedge.budget` of a token to) or the retry budget is spent. A write is never hedged: `hedge` on a tool that is not
idempotent is ignored, and said once by its adapter (`core.ignored`).

One core decides, two thin drivers wait and run: both ask the call's `logic.Race` what
to do next (`Race.next`: wait, send the hedge now due, or stop) and hand it each
attempt's end. The sync driver runs every attempt of a race on the dispatch pool's
threads (the caller only waits for the first good answer); the async driver runs each as
a task.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import threading
from collections.abc import Awaitable
from typing import Any

from ...core.call import Call
from ...core.errors import ToolRaised
from ...core.hints import is_rate_limited, retry_after
from ...core.policy import Hedge, ResolvedPolicy
from ...runtime import deadline as _deadline
from ...runtime import drain as _drain
from ...runtime.adaptive import LatencyHistory
from ...runtime.executor import dispatch_pool
from ...runtime.job import Job
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

_losers: set[asyncio.Task[Any]] = set()
"""Cancelled losing attempts not yet finished (the loop keeps only weak references)."""


def _forget(task: asyncio.Task[Any]) -> None:
    _losers.discard(task)
    if not task.cancelled():
        task.exception()  # read, so that asyncio does not log it as never retrieved


def _options(call: Call) -> Hedge:
    hedge = call.resolved.policy.hedge
    assert hedge is not None, "the stage applies to hedged tools only"
    return hedge


class HedgeStage(Stage):
    name = "hedge"

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
        """The tool's hedge budget: a bucket of `BURST` tokens, `Hedge.budget` more per
        first attempt."""
        ratio = _options(call).budget
        return self.budgets.get(call.name, lambda: HedgeBudget(ratio=ratio))

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
        if refused is not None or not self.budget_for(call).try_spend():
            return False
        retries = self.env.retry_budget(call)  # the retry stage's: hedges spend from it
        return retries is None or retries.try_spend()

    def losers(self, tool: str) -> int:
        """Losing attempts of `tool` still running on a thread."""
        return self._running_losers.get(tool, 0)

    def _left_running(self, tool: str, job: Job[Any] | asyncio.Task[Any]) -> None:
        """Count a loser that holds a thread until it finishes."""
        with self._lock:
            self._running_losers[tool] = self.losers(tool) + 1

        def done(_: Any) -> None:
            with self._lock:
                left = self.losers(tool) - 1
                if left > 0:
                    self._running_losers[tool] = left
                else:
                    self._running_losers.pop(tool, None)

        job.add_done_callback(done)

    def _answered(self, call: Call, history: LatencyHistory | None, seconds: float) -> None:
        if history is not None:
            history.add(seconds)

    def _failed(self, call: Call, exc: BaseException) -> None:
        """Note a rate-limit answer: the tool is not hedged for a while."""
        if isinstance(exc, ToolRaised) and is_rate_limited(exc.original):
            quiet = retry_after(exc.original) or RATE_LIMIT_QUIET_S
            self._quiet[call.name] = call.resolved.policy.clock() + quiet

    @staticmethod
    def _attempt_of(call: Call, n: int) -> Call:
        return call if n == 0 else dataclasses.replace(call, hedge=n)

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
        self, call: Call, attempt: Call, call_next: Next, history: LatencyHistory | None
    ) -> Any:
        """One attempt, timed: its latency is learned, a rate-limit answer noted."""
        clock = call.resolved.policy.clock
        start = clock()
        try:
            value = call_next(attempt)
        except BaseException as exc:
            self._failed(call, exc)
            raise
        self._answered(call, history, clock() - start)
        return value

    def wrap(self, call: Call, call_next: Next) -> Any:
        if not self._hedged(call):
            return call_next(call)
        race, history = self._enter(call)
        if race is None:
            return self._attempt(call, call, call_next, history)
        clock = call.resolved.policy.clock
        cond = threading.Condition(threading.Lock())
        jobs: dict[int, Job[None]] = {}

        def one(n: int, attempt: Call) -> None:
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
            jobs[n] = dispatch_pool().submit(lambda: ctx.run(one, n, attempt))

        with cond:
            launch()
            while (move := race.next(clock())) is not Move.DONE:
                if move is Move.WAIT:
                    cond.wait(real_wait(clock, race.due))
                elif self._may_hedge(call):
                    launch()
                else:
                    race.hold()
            for n, job in jobs.items():
                if n != race.winner and not job.done():
                    self._left_running(call.name, job)  # a loser, still running
            self._close(call, race)
        return race.outcome()

    # -- the async driver ----------------------------------------------------------

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        if not self._hedged(call):
            return call_next(call)
        return self._arace(call, call_next)

    async def _aattempt(
        self, call: Call, attempt: Call, call_next: AsyncNext, history: LatencyHistory | None
    ) -> Any:
        """`_attempt`, on the event loop (a cancelled attempt notes nothing)."""
        clock = call.resolved.policy.clock
        start = clock()
        try:
            value = await call_next(attempt)
        except Exception as exc:
            self._failed(call, exc)
            raise
        self._answered(call, history, clock() - start)
        return value

    async def _arace(self, call: Call, call_next: AsyncNext) -> Any:
        race, history = self._enter(call)
        if race is None:
            return await self._aattempt(call, call, call_next, history)
        clock = call.resolved.policy.clock
        loop = asyncio.get_running_loop()
        live: dict[asyncio.Task[Any], int] = {}

        def launch() -> None:
            n = race.start()
            attempt = self._attempt_of(call, n)
            live[loop.create_task(self._aattempt(call, attempt, call_next, history))] = n

        launch()
        try:
            move = Move.WAIT
            while move is not Move.DONE:
                if move is Move.HEDGE:
                    if self._may_hedge(call):
                        launch()
                    else:
                        race.hold()
                # Always wait (at least one turn of the loop) before asking again: an
                # attempt just started runs up to its first await before the next is due.
                done, _ = await asyncio.wait(
                    live, timeout=real_wait(clock, race.due), return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    n = live.pop(task)
                    exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
                    if exc is None:
                        race.won(n, task.result())
                    else:
                        race.lost(n, exc)
                move = race.next(clock())
        finally:
            for task in live:  # the losers (or every attempt, when the caller is cancelled)
                _losers.add(task)
                task.add_done_callback(_forget)
                if call.offload:  # a sync tool's thread cannot be stopped: it runs out
                    self._left_running(call.name, task)
                else:
                    task.cancel()
        self._close(call, race)
        return race.outcome()
