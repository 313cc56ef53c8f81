"""Dedup: a call identical to an earlier one is reused, blocked, or flagged.

The key is `core.key.call_key` (tool name and canonical arguments, or `Dedup.key`),
scoped by conversation thread (no thread: the step or model message, see `scope_of`), and covering
who asks (the declared inputs, the runtime context, `configurable`). What happens is decided
by `pipeline.dedup.logic.decide`. Identical calls of one step are one logical call: the first
runs, its twins wait for it and share its outcome (`pipeline.dedup.twins`). Identical calls
of different steps running at the same time are decided once: a read waits for the first
and reuses its result, a write is blocked. Entries come from this pipeline's in-memory
ledger, or from the graph state's ``tool_ledger`` (so dedup survives checkpoints and
restarts); new entries are left on the call for the adapter to write back to the state,
where they point at the thread's messages rather than copy them
(`pipeline.dedup.graph_state`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from ...core.call import Call
from ...core.errors import DuplicateCall, OutcomeStillUnknown, ToolErrorType
from ...core.key import call_key
from ...core.policy import ResolvedPolicy
from ...core.resume import position
from ...text import messages as m
from ...text.classify import classify
from ...text.envelope import _content_of, is_message_list
from ...text.redact import redact
from ...text.truncate import text_of
from ..shared import backend_for, off_loop
from ..stage import AsyncNext, Env, Next, Stage
from .graph_state import forget_if_gone, has_ledger, persist, state_entry
from .logic import (
    Action,
    Entry,
    Ledger,
    Status,
    block_reason,
    decide,
    effective_mode,
    run_untracked,
    scope_of,
)
from .shared import shared_begin
from .twins import Share, Twins

Waiter = concurrent.futures.Future[None]


def _wait_limit(call: Call) -> float:
    policy = call.resolved.policy
    return (policy.timeout or 60.0) * policy.retry.max_attempts + 1.0


class DedupStage(Stage):
    name = "dedup"
    clock: Callable[[], float] = staticmethod(time.time)
    """The ledger clock (wall time, so that entries in graph state age across restarts)."""

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return effective_mode(resolved.policy.dedup.mode, resolved.idempotent) != "off"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self._lock = threading.Lock()
        self._ledgers: dict[str, Ledger] = {}
        self._twins = Twins()

    def _ledger(self, call: Call) -> Ledger:
        ledger = self._ledgers.get(call.name)
        if ledger is None:
            policy = call.resolved.policy
            ledger = Ledger(
                ttl=policy.dedup.ttl_s, max_entries=policy.dedup.max_entries, clock=self.clock
            )
            self._ledgers[call.name] = ledger
        return ledger

    # -- decisions (under the lock) ---------------------------------------------------

    def _begin(self, call: Call, key: str) -> tuple[Action, Entry, Waiter | None]:
        """Decide; for RUN/WARN a fresh pending entry now stands for this call."""
        mode = effective_mode(call.resolved.policy.dedup.mode, call.idempotent)
        scoped = (scope_of(call) or "", key)
        with self._lock:
            ledger = self._ledger(call)
            entry = ledger.get(scoped)
            if entry is not None:
                forget_if_gone(call, entry)
            else:
                entry = state_entry(call.state, key)
                if entry is not None and ledger.fresh(entry):
                    ledger.put(scoped, entry)
                else:
                    entry = None
            pos = position(call)
            action = decide(mode, call.idempotent, entry, call.id, pos)
            if action in (Action.RUN, Action.WARN):
                repeats = 0 if entry is None else entry.repeats + 1
                entry = Entry(
                    "pending", repeats=repeats, at=ledger.clock(), call_id=call.id,
                    step=call.step, pos=pos,
                )  # fmt: skip
                ledger.put(scoped, entry)
                return action, entry, None
            assert entry is not None
            if action is Action.REPLAY:
                return action, entry, None
            if action is Action.WAIT:
                if entry.done is None:
                    entry.done = concurrent.futures.Future()  # made only when someone waits
                return action, entry, entry.done
            entry.repeats += 1
            self._persist(call, key, entry)
            return action, entry, None

    def _end(self, call: Call, key: str, entry: Entry, value: Any, exc: Exception | None) -> None:
        status: Status
        content = None
        if exc is not None:
            failure = classify(exc, call)
            unknown = failure.error is ToolErrorType.UNKNOWN_OUTCOME
            status = "unknown_outcome" if unknown else "failed"
        elif call.record.served_by not in ("tool", "cache"):
            status = "failed"  # a fallback or stale data answered: nothing fresh to reuse
        elif isinstance(value, Command):
            status = "done"
        elif isinstance(value, ToolMessage) and value.status == "error":
            status = "failed"
        elif isinstance(value, ToolMessage):
            status, content = "ok", value.content
        else:
            status, content = "ok", _content_of(value)
        with self._lock:
            entry.status, entry.content = status, content
            self._release(entry)
        if status != "failed":
            self._persist(call, key, entry)

    def _abort(self, call: Call, entry: Entry) -> None:
        """Cancelled mid-run: a write may have taken effect, a read simply failed."""
        with self._lock:
            entry.status = "failed" if call.idempotent else "unknown_outcome"
            self._release(entry)

    @staticmethod
    def _release(entry: Entry) -> None:
        """Wake the calls waiting for `entry` (call with the lock held)."""
        if entry.done is not None:
            entry.done.set_result(None)
            entry.done = None

    _persist = staticmethod(persist)

    # -- answers ---------------------------------------------------------------------

    @staticmethod
    def _looping(call: Call, entry: Entry) -> bool:
        return entry.repeats >= call.resolved.policy.dedup.looping_after

    def _notice(self, call: Call, entry: Entry, template: str) -> None:
        call.record.notices.append(template.format(tool=call.name, n=entry.repeats))
        if self._looping(call, entry):
            call.record.notices.append(m.DEDUP_LOOPING.format(n=entry.repeats))

    def _answer(self, call: Call, action: Action, entry: Entry) -> Any:
        if action is Action.REPLAY:
            if entry.status == "unknown_outcome":
                raise OutcomeStillUnknown()
            call.record.served_by = "dedup"
            return entry.content
        if action is Action.REUSE:
            call.record.served_by = "dedup"
            self._notice(call, entry, m.DEDUP_REUSED)
            return entry.content
        previous = None if entry.content is None else redact(text_of(entry.content), limit=300)
        raise DuplicateCall(
            previous=previous,
            repeats=entry.repeats,
            looping=self._looping(call, entry),
            reason=block_reason(entry),
        )

    # -- drivers ---------------------------------------------------------------------

    @staticmethod
    def _off(call: Call) -> bool:
        mode = effective_mode(call.resolved.dedup_mode, call.idempotent)
        if mode == "off":
            return True
        if call.twinless and not call.thread_id and not has_ledger(call.state):
            # Scoped by its message, which holds nothing identical: nothing to decide.
            return True
        return scope_of(call) is None

    def _decide(
        self, call: Call, key: str
    ) -> tuple[
        Action,
        Entry | None,
        Waiter | None,
        Callable[[Any, Exception | None], None],
        Callable[[], None],
    ]:
        """The action for `call`, its ledger entry, a waiter (WAIT), and how to record the
        run's end (`end`) or its being cut short (`abort`) in the ledger that decided:
        the store shared by the workers (see `pipeline.shared`), else this pipeline's own."""
        backend = backend_for(self.env, call)
        started = None if backend is None else shared_begin(self, call, key, backend)
        if started is not None:
            shared, action, entry = started
            if entry is None:
                action = Action.WAIT
            return (
                action,
                entry,
                None,
                lambda value, exc: shared.end(entry, value, exc),  # type: ignore[arg-type]
                lambda: shared.abort(entry),  # type: ignore[arg-type]
            )
        action, entry, waiter = self._begin(call, key)
        return (
            action,
            entry,
            waiter,
            lambda value, exc: self._end(call, key, entry, value, exc),
            lambda: self._abort(call, entry),
        )

    def _settle(self, call: Call, action: Action, entry: Entry | None) -> tuple[bool, Any]:
        """(True, the answer) when the ledger answers `call`; (False, None) to run it."""
        if action in (Action.REUSE, Action.BLOCK, Action.REPLAY):
            assert entry is not None
            return True, self._answer(call, action, entry)
        if action is Action.WARN:
            assert entry is not None
            self._notice(call, entry, m.DEDUP_WARN)
        return False, None

    def _grouped(self, call: Call) -> bool:
        """Whether `call` may have identical siblings in its step that share its outcome
        (`pipeline.dedup.twins`); ``warn`` runs each of them, as the user asked."""
        if call.twinless or call.step is None:
            return False
        return effective_mode(call.resolved.policy.dedup.mode, call.idempotent) != "warn"

    def wrap(self, call: Call, call_next: Next) -> Any:
        if self._off(call):
            return call_next(call)
        key = call_key(call)
        joined = self._twins.join(call, key) if self._grouped(call) else None
        group = None
        if joined is not None:
            group, leads = joined
            if not leads:  # a twin runs for this call: wait for it, then take a share
                if not group.settled:
                    group.wait(_wait_limit(call))
                if group.share is not None:
                    return group.share.answer(call)
                group = None  # the ledger decides, as for any repeat
        share: Share | None = None
        try:
            action, entry, waiter, end, abort = self._decide(call, key)
            if waiter is not None:
                with contextlib.suppress(concurrent.futures.TimeoutError):
                    waiter.result(timeout=_wait_limit(call))
                action, entry, waiter, end, abort = self._decide(call, key)
            answered, answer = self._settle(call, action, entry)
            if answered:
                return answer
            if action is Action.WAIT:
                return call_next(run_untracked(call))
            shown = len(call.record.notices)
            try:
                value = call_next(call)
            except Exception as exc:
                end(None, exc)
                share = _failure_share(exc, entry)
                raise
            except BaseException:
                abort()
                raise
            end(value, None)
            share = _value_share(call, entry, value, shown)
            return value
        finally:
            if group is not None:
                group.settle(share)

    def awrap(self, call: Call, call_next: AsyncNext) -> Awaitable[Any]:
        if self._off(call):
            return call_next(call)
        return self._awrap_on(call, call_next)

    async def _awrap_on(self, call: Call, call_next: AsyncNext) -> Any:
        key = call_key(call)
        joined = self._twins.join(call, key) if self._grouped(call) else None
        group = None
        if joined is not None:
            group, leads = joined
            if not leads:  # a twin runs for this call: wait for it, then take a share
                if not group.settled:
                    await group.await_(_wait_limit(call))
                if group.share is not None:
                    return group.share.answer(call)
                group = None  # the ledger decides, as for any repeat
        shared = backend_for(self.env, call) is not None  # the ledger is in a store
        share: Share | None = None
        try:
            action, entry, waiter, end, abort = await off_loop(shared, self._decide, call, key)
            if waiter is not None:
                await asyncio.wait({asyncio.wrap_future(waiter)}, timeout=_wait_limit(call))
                action, entry, waiter, end, abort = await off_loop(
                    shared, self._decide, call, key
                )
            answered, answer = self._settle(call, action, entry)
            if answered:
                return answer
            if action is Action.WAIT:
                return await call_next(run_untracked(call))
            shown = len(call.record.notices)
            try:
                value = await call_next(call)
            except Exception as exc:
                await off_loop(shared, end, None, exc)
                share = _failure_share(exc, entry)
                raise
            except BaseException:
                abort()  # cancelled: recorded at once, no further await
                raise
            await off_loop(shared, end, value, None)
            share = _value_share(call, entry, value, shown)
            return value
        finally:
            if group is not None:
                group.settle(share)


def _failure_share(exc: Exception, entry: Entry | None) -> Share | None:
    """What the twins of a call that failed with `exc` take: the same failure, unless
    the ledger answers them (a write whose outcome is unknown is blocked, never asked
    about twice) or it is LangGraph control flow (each twin then goes its own way)."""
    if isinstance(exc, GraphBubbleUp) or entry is None or entry.status != "failed":
        return None
    return Share(exc=exc)


def _value_share(call: Call, entry: Entry | None, value: Any, shown: int) -> Share | None:
    """What the twins of a call answered with `value` take: the ledger's answer when it
    keeps the result; the same answer when it was not the tool's own (a fallback's,
    with the notices the stages inside dedup added after the first `shown`)."""
    if entry is None or entry.status != "failed":
        return None
    if isinstance(value, Command) or is_message_list(value):
        return None  # a Command answers its own call id only: each twin runs
    record = call.record
    return Share(value=value, served_by=record.served_by, notices=tuple(record.notices[shown:]))
