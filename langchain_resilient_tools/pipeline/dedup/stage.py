"""Dedup: a call identical to an earlier one is reused, blocked, or flagged.

The key is `core.key.call_key` (tool name and canonical arguments, or `Dedup.key`),
scoped by conversation thread (no thread: the step or model message, see `scope_of`),
and covering who asks (the declared inputs, the runtime context, `configurable`).
Identical calls of one step are one logical call: the first runs, its twins wait for it
and share its outcome (`pipeline.dedup.twins`). Identical calls of different steps
running at the same time are decided once: a read waits for the first and reuses its
result, a write is blocked. Entries come from this pipeline's in-memory ledger
(`local.LocalLedger`), or a store shared by the workers (`shared.SharedLedger`), or from
the graph state's ``tool_ledger`` (so dedup survives checkpoints and restarts); new
entries are left on the call for the adapter to write back to the state, where they
point at the thread's messages rather than copy them (`pipeline.dedup.graph_state`).

One core decides, two thin drivers (sync `wrap`, async `awrap`) do the I/O it names. The
core is a `core.Visit` per call: a driver asks it what to do next (a `core.Do`), does
that one thing and hands the result back, which names the next thing. The path of one
call through the stage, in once and out once:

    in     ``Visit.of(call)``: ``None`` when there is nothing to decide (dedup off, or
           no scope): the call passes straight on. Else its key, mode and scope, once.
           A call that may have twins in its step joins their group (`twins.Twins`):
    WAIT_TWIN   a follower waits for its leader, then takes its share (``ANSWER``)
           or, when the ledger answers the twins, goes on as any repeat (``ASK``).
    ASK    the ledger reads the key's entry, decides (`logic.decide`, the table of
           what an earlier identical call means) and writes what it decided, in one
           step; ``Visit.told`` turns its `core.Ruling` into the next thing:
    WAIT_ENTRY  an identical read runs now: wait for it once, then ``ASK`` again;
    ANSWER ``Visit.answer``: the earlier result (reused, replayed), or raised
           (blocked, or a write whose outcome is still unknown);
    PASS   it still runs after that wait: run untracked, nothing recorded;
    RUN    run the rest of the pipeline; ``Visit.ran``, ``failed`` (the one place
           where dedup classifies an exception) or ``cut`` (cancelled) give the
           `core.End` the ledger records.
    out    a leader settles its twins' group with ``Visit.share``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.messages import ToolMessage

from ...core.call import Call
from ...core.policy import ResolvedPolicy
from ...state.graph import has_ledger
from ..shared import backend_for, off_loop
from ..stage import AsyncNext, Env, Next, Stage
from ..step import Outcome, Step, StepUpdate
from .core import Do, End, Keeper, Visit
from .graph_state import LEDGER_META, answered_entries, take_entries
from .local import LocalLedger
from .logic import Ledger, effective_mode
from .shared import SharedLedger
from .twins import StepTwins, Twins

_UNKNOWN = End("unknown_outcome")

_runs = itertools.count()
"""Numbers the runs of a node's step (a step whose adapter knows no identity for it)."""


def _alone(step_id: str, call: Call) -> None:
    """Mark `call` as one of step `step_id` that has no identical call in it."""
    call.step = step_id
    call.twinless = True


class DedupStage(Stage):
    name = "dedup"

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return effective_mode(resolved.policy.dedup.mode, resolved.idempotent) != "off"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.local = LocalLedger()
        """This pipeline's ledger (the one that decides without a shared store)."""
        self._twins = Twins()
        env.known_write = self._learn

    def open_step(self, step: Step) -> None:
        """Identical calls of the step are one logical call (invariant 8): the first
        runs first (`Step.order`) and each call is marked with its step and its leader.
        A step in which no tool is called twice (most) has no twins: its calls are
        marked here, without looking at their arguments."""
        step_id = step.id or f"run:{next(_runs)}"  # one run of a node's step
        calls = step.tool_calls
        names = [tc.get("name") for tc in calls]
        if len(set(names)) == len(names):
            step.on_call(partial(_alone, step_id))
            return
        twins = StepTwins.of(calls, step_id)
        step.order = twins.firsts
        step.on_call(twins.place)

    def _learn(self, call: Call, content: Any) -> None:
        """`Env.known_write`: a write the journal answered (a resumed step's: it ran, or
        may have, before its worker died) never came through here, but a repeat of it
        is a repeat all the same. Kept in this pipeline's ledger and, through the call,
        the graph state's (a store's ledger blocks the repeat already: the dead worker's
        pending entry stands there until its TTL)."""
        visit = Visit.of(call)
        if visit is not None:
            self.local.learn(visit, _UNKNOWN if content is None else End("ok", content))

    def mark_answer(self, outcome: Outcome, message: ToolMessage) -> Mapping[str, Any] | None:
        """The ledger entries the call left for the graph state, as it keeps them now
        that `message` answers the call (`graph_state.answered_entries`)."""
        entries = outcome.call.ledger
        if not entries:
            return None
        return {LEDGER_META: answered_entries(entries, message, outcome.call)}

    def close_step(
        self, step: Step, messages: Sequence[ToolMessage], update: StepUpdate, keep: bool
    ) -> None:
        """The entries of the step's answers, for the graph state (taken off them even
        when `keep`: the update writes them)."""
        entries = take_entries(messages)
        if entries:
            update.thread.setdefault("dedup", {}).update(entries)

    @property
    def clock(self) -> Callable[[], float]:
        """The ledger clock (wall time, so that entries in graph state age across restarts)."""
        return self.local.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.local.clock = clock

    @property
    def _ledgers(self) -> dict[str, Ledger]:
        return self.local.ledgers

    def _open(self, call: Call) -> tuple[Visit, Keeper, Do] | None:
        """`call`'s visit, the ledger that decides it and the first thing to do; `None`
        when dedup has nothing to decide (decided here first for the usual call: alone
        in its step, with no thread and no ledger in its state)."""
        if call.twinless and not call.thread_id and not has_ledger(call.state):
            return None  # scoped by its message, which holds nothing identical
        visit = Visit.of(call)
        if visit is None:
            return None
        backend = backend_for(self.env, call)
        ledger = self.local if backend is None else SharedLedger(self.local, backend)
        if not visit.grouped:
            return visit, ledger, Do.ASK
        return visit, ledger, visit.start(self._twins.join(call, visit.key))

    # -- the sync driver -----------------------------------------------------------

    def wrap(self, call: Call, call_next: Next) -> Any:
        opened = self._open(call)
        if opened is None:
            return call_next(call)
        visit, ledger, do = opened
        try:
            while True:
                if do is Do.ASK:
                    do = visit.told(ledger.begin(visit))
                elif do is Do.RUN:
                    try:
                        value = call_next(call)
                    except Exception as exc:
                        ledger.end(visit, visit.failed(exc))
                        raise
                    except BaseException:
                        ledger.end(visit, visit.cut())
                        raise
                    ledger.end(visit, visit.ran(value))
                    return value
                elif do is Do.ANSWER:
                    return visit.answer()
                elif do is Do.PASS:
                    return call_next(call)
                elif do is Do.WAIT_TWIN:
                    visit.twin.wait(visit.limit)
                    do = visit.twin_settled()
                else:  # Do.WAIT_ENTRY
                    with contextlib.suppress(concurrent.futures.TimeoutError):
                        visit.waiter.result(timeout=visit.limit)
                    do = Do.ASK
        finally:
            if visit.leading is not None:
                visit.leading.settle(visit.share)
            visit.share = None  # a failure's traceback holds this frame, which holds it

    # -- the async driver ----------------------------------------------------------

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        opened = self._open(call)
        if opened is None:
            return call_next(call)
        return self._awrap(call, call_next, *opened)

    async def _awrap(
        self, call: Call, call_next: AsyncNext, visit: Visit, ledger: Keeper, do: Do
    ) -> Any:
        remote = ledger.remote  # a store: its reads and writes run off the event loop
        try:
            while True:
                if do is Do.ASK:
                    if remote:
                        do = visit.told(await off_loop(True, ledger.begin, visit))
                    else:  # in place, without a coroutine of its own
                        do = visit.told(ledger.begin(visit))
                elif do is Do.RUN:
                    try:
                        value = await call_next(call)
                    except Exception as exc:
                        end = visit.failed(exc)
                        await off_loop(remote, ledger.end, visit, end)
                        raise
                    except BaseException:
                        ledger.end(visit, visit.cut())  # cancelled: at once, no await
                        raise
                    end = visit.ran(value)
                    if remote:
                        await off_loop(True, ledger.end, visit, end)
                    else:
                        ledger.end(visit, end)
                    return value
                elif do is Do.ANSWER:
                    return visit.answer()
                elif do is Do.PASS:
                    return await call_next(call)
                elif do is Do.WAIT_TWIN:
                    await visit.twin.await_(visit.limit)
                    do = visit.twin_settled()
                else:  # Do.WAIT_ENTRY
                    await asyncio.wait({asyncio.wrap_future(visit.waiter)}, timeout=visit.limit)
                    do = Do.ASK
        finally:
            if visit.leading is not None:
                visit.leading.settle(visit.share)
            visit.share = None  # a failure's traceback holds this frame, which holds it
