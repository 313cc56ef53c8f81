"""The write journal: a worker that dies mid-write never makes the write run again silently.

Writes only (`applies`), in a step a run can resume (`core.resume.step_of`: a thread of a
graph with a checkpointer; a call without one runs unjournaled: nothing could resume
it, and no entry may answer a later run that reuses its call id), with a journal
backend (`where.journal_backend`). Entries are kept per step of the thread, and answer
only a call with the same arguments (`logic.judge`). Before the
write runs, its intent is claimed under the call's idempotency key (one round trip);
while it runs, its lease is renewed (`runtime.lease`, only for writes that outlast a
third of the lease); when it answers, the receipt is written (one round trip). The
intent is synced to disk before the tool runs; the receipt is committed before the answer
is returned but not waited on to reach the disk (`state.backend.put_unsynced`): a dead
worker loses neither, and what a power loss or a database crash may take is the receipt
alone, which leaves the intent, its worker gone: an unknown outcome, never a second run.
A call whose key already has an entry is decided by `logic.judge`:

- **receipt**: answered from it; nothing runs (``served_by="journal"``, marked so);
- **running** (its worker is alive and holds its lease, e.g. another replica): the
  receipt is waited for within the call's deadline; if none comes, ``unknown_outcome``
  (`WriteInFlight`), never a second run;
- **orphaned** (its worker is gone, or its lease ran out): the outcome is unknown. With
  `UnknownOutcome.verify` the verify stage looks it up before anything runs (found: its
  answer; not found: run once more, same key); without it, `OrphanedWrite`
  (``unknown_outcome``; ``unknown_outcome="interrupt"`` then asks a person). A keyed
  write (``idempotency_key``) is sent again with the same key, which is what the key is
  for: the service carries it out once.

A journal store that fails before it could tell whether the write already ran (a step
resumed after a crash looks just like a first run) leaves its outcome unknown, whatever
``Shared.on_error`` says: running it unjournaled is the silent repeat the journal is
there to prevent. So the write is not run (`JournalUnreadable`, ``unknown_outcome``:
``unknown_outcome="interrupt"`` asks a person), but with `UnknownOutcome.verify`, which
looks it up first (found: its answer; not found: it runs once, unjournaled), unless
``on_error="closed"`` (nothing runs). A write that may be sent again (keyed, declared
safe to repeat, or run again by a person's choice) follows ``on_error``: ``"closed"``
does not run it, ``"open"`` runs it unjournaled (logged). A store that only waits for
another writer's lock (`BackendError.lock_wait`: SQLite's "database is locked" while
another process makes the table or writes) is tried again first (`_Entry.patiently`),
within the call's deadline; the receipt likewise, within half a lease. A receipt that
cannot be written leaves the intent, which a later reader will find orphaned (its
outcome unknown: true). LangGraph control flow raised through the write (an
interrupt inside the tool) removes the intent: the tool is meant to run again on resume.
So does a write refused because the run is draining (`Drained`: it was never started).
A write cut short (its run cancelled: a client cancelled it, a server shut down) is
marked orphaned at once, so a resume settles it without waiting out the lease; on the
async path a store is marked from a worker thread, since the cancelled task may await
nothing more and a store's sync methods must not run on the event loop (LangGraph
Server's own store refuses them there).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langgraph.errors import GraphBubbleUp
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from ...core import testing
from ...core.call import Call
from ...core.errors import (
    BackendError,
    Drained,
    JournalUnreadable,
    OrphanedWrite,
    Recorded,
    WriteInFlight,
)
from ...core.idempotency import key_for
from ...core.policy import ResolvedPolicy
from ...core.resume import step_of
from ...runtime import deadline as _deadline
from ...runtime.executor import dispatch_pool
from ...runtime.lease import keeper
from ...runtime.owner import me
from ...state.backend import StateBackend, put_unsynced
from ...state.choose import blocks
from ...text import messages as m
from ...text.classify import classify
from ..shared import fail, off_loop
from ..stage import AsyncNext, Env, Next, Stage
from . import logic, recover
from .logic import NS_JOURNAL, Verdict
from .where import Made, journal_backend

log = logging.getLogger(__name__)

POLL_S = 0.1
"""Seconds between two reads of a write another live worker is running."""


class _Run:
    """A write this process runs; `waiters` is made by the first call that waits for it."""

    __slots__ = ("waiters",)

    def __init__(self) -> None:
        self.waiters: concurrent.futures.Future[None] | None = None


_running: dict[str, _Run] = {}
"""Journal keys this process is running a write for, until its receipt is written (a
re-run of the same call in this process, e.g. a resume while the first run still goes
on, waits for it instead of reading the store again and again)."""
_running_lock = threading.Lock()


def _started_here(key: str) -> _Run:
    run = _Run()
    with _running_lock:
        _running[key] = run
    return run


def _finished_here(key: str, run: _Run) -> None:
    with _running_lock:
        if _running.get(key) is run:
            del _running[key]
        waiters = run.waiters
    if waiters is not None:
        waiters.set_result(None)


def _owned_here(found: Any) -> bool:
    """Whether the owner of the entry `found` is this process."""
    owner = found.get("owner") if isinstance(found, dict) else None
    return isinstance(owner, dict) and owner.get("pid") == os.getpid()


def _running_here(key: str, found: Any) -> concurrent.futures.Future[None] | None:
    """The in-process run of `key` to wait for, when the live owner of `found` is this
    process."""
    if not _owned_here(found):
        return None
    with _running_lock:
        run = _running.get(key)
        if run is None:
            return None
        if run.waiters is None:
            run.waiters = concurrent.futures.Future()
        return run.waiters


def _still_running_here(key: str, found: Any) -> bool:
    """Whether this process, the owner of `found`, still runs `key` (nothing waits)."""
    if not _owned_here(found):
        return False
    with _running_lock:
        return key in _running


LOCK_WAIT_TRIES = 30
"""At most this many tries of one journal operation while the store reports a lock."""
T = TypeVar("T")


def _lock_wait(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.lock_wait


class _Entry:
    """One call's journal session: its backend, key and intent."""

    __slots__ = ("args", "backend", "call", "handle", "intent", "key", "lease", "run", "ttl")

    def __init__(self, call: Call, backend: StateBackend, step: str) -> None:
        policy = call.resolved.policy
        self.call, self.backend = call, backend
        self.key = logic.entry_key(call.name, key_for(call), step, rerun=call.resolved.rerun)
        self.lease, self.ttl = policy.journal.lease_s, policy.journal.ttl_s
        self.intent = logic.intent(
            call.name, call.args, owner=me(), now=backend.clock(), lease=self.lease, step=step
        )
        self.args: str = self.intent["args"]

    def judge(self, found: Any) -> Verdict:
        return logic.judge(found, self.backend.clock(), self.args)

    def patiently(self, op: Callable[[], T], budget: float | None = None) -> T:
        """`op()`, tried again while the store waits for another writer's lock, within
        `budget` seconds (default: what is left of the call's deadline, else a lease);
        any other failure, or the lock past the budget, is raised."""
        try:
            return op()
        except BackendError as exc:
            if not exc.lock_wait:
                raise
        if budget is None:
            left = _deadline.remaining(self.call)
            budget = self.lease if left is None else max(0.0, left)
        retrying = Retrying(
            retry=retry_if_exception(_lock_wait),
            stop=stop_after_delay(budget) | stop_after_attempt(LOCK_WAIT_TRIES),
            wait=wait_exponential(multiplier=0.02, max=0.5),
            sleep=testing.sleep,
            reraise=True,
        )
        return retrying(op)

    # -- the write's run ------------------------------------------------------------------

    def start(self) -> None:
        """The write is about to run here: hold its lease, mark it running in-process."""
        self.run = _started_here(self.key)
        self.handle = keeper.hold(self.renew, self.lease / 3)

    def close(self, write: Callable[..., None], *args: Any) -> None:
        """The write ended: stop its lease (no renewal runs after this), then `write` its
        end (the receipt, or the intent forgotten or abandoned), then wake whoever in this
        process waits for it."""
        keeper.release(self.handle)
        try:
            write(*args)
        finally:
            _finished_here(self.key, self.run)

    # -- store operations (one round trip each) ------------------------------------------

    def claim(self) -> bool:
        return self.backend.claim(NS_JOURNAL, self.key, self.intent, ttl=self.ttl)

    def read(self) -> Any:
        return self.backend.get(NS_JOURNAL, self.key)

    def take_over(self) -> None:
        """Own an orphaned intent (the call goes on here: verify, or an answer)."""
        self.backend.put(NS_JOURNAL, self.key, self.intent, ttl=self.ttl)

    def renew(self) -> None:
        now = self.backend.clock()
        self.intent = logic.renewed(self.intent, now=now, lease=self.lease)
        self.backend.put(NS_JOURNAL, self.key, self.intent, ttl=self.ttl)

    def write_receipt(self, value: Any = None, exc: Exception | None = None) -> None:
        failure = None if exc is None else classify(exc, self.call)
        cap = self.call.resolved.policy.output.max_chars
        entry = logic.receipt(
            self.intent, now=self.backend.clock(), value=value, failure=failure, cap=cap
        )
        backend, key, ttl = self.backend, self.key, self.ttl
        try:  # what a power loss takes leaves the intent: its outcome unknown, never rerun
            self.patiently(
                lambda: put_unsynced(backend, NS_JOURNAL, key, entry, ttl=ttl), self.lease / 2
            )
        except BackendError:
            log.warning("journal: the receipt of %s was not written", self.call.name)

    def abandon(self) -> None:
        try:
            self.backend.put(NS_JOURNAL, self.key, logic.abandoned(self.intent), ttl=self.ttl)
        except BackendError:
            log.warning("journal: %s was cut short and not marked", self.call.name)

    def forget(self) -> None:
        try:
            self.backend.delete(NS_JOURNAL, self.key)
        except BackendError:
            log.warning("journal: the intent of %s was not removed", self.call.name)

    # -- decisions -----------------------------------------------------------------------

    def begin(self) -> tuple[Verdict, Any]:
        """Claim the key, or read what is there: (verdict, entry found)."""
        if self.claim():
            return Verdict.NEW, None
        found = self.read()
        verdict = self.judge(found)
        if verdict is Verdict.NEW:  # gone, unreadable or another call's: claim it over
            self.take_over()
        return verdict, found

    def polls(self) -> int:
        """How many more reads a wait for another worker's receipt may take."""
        left = _deadline.remaining(self.call)
        bound = 3 * self.lease if left is None else max(0.0, left)
        return math.ceil(bound / POLL_S)

    def answer(self, verdict: Verdict, found: Any) -> tuple[bool, Any]:
        """(True, answer) when the journal answers the call; (False, None) to run it."""
        call = self.call
        if verdict is Verdict.RECEIPT:
            call.record.served_by = "journal"
            if found.get("outcome") == "error":
                raise Recorded(found.get("failure") or {})
            call.record.notices.append(m.JOURNAL_REPLAY)
            return True, found.get("content") or ""
        if verdict is Verdict.ORPHANED:
            self.patiently(self.take_over)
            ago = max(0.0, self.backend.clock() - float(found.get("started") or 0.0))
            if call.resolved.idempotent:  # a keyed write, or one declared safe to repeat
                keyed = call.resolved.policy.idempotency_key is not False
                call.record.notices.append(m.JOURNAL_RESENT if keyed else m.JOURNAL_RESENT_SAFE)
                return False, None
            if call.resolved.policy.unknown_outcome.verify is None:
                raise OrphanedWrite(seconds_ago=ago)
            call.unsettled = OrphanedWrite(seconds_ago=ago)  # verify looks it up first
        if verdict is Verdict.RUNNING:
            raise WriteInFlight()
        return False, None


_ANSWERED, _WAIT, _RUN = "answered", "wait", "run"
"""What `JournalStage._open` found to do."""


class JournalStage(Stage):
    name = "journal"

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self._made: Made = {}  # the journal backend of each store or saver met

    def applies(self, resolved: ResolvedPolicy) -> bool:
        return resolved.policy.journal.enabled and resolved.write

    def settle(self, call: Call, steps: Sequence[str] | None, since: float | None) -> Any:
        """What became of `call`, which a stopped run left unanswered, from its journal
        entry at one of `steps` (`recover.settle`; nothing runs)."""
        backend = journal_backend(self.env, call, self._made) if steps else None
        value = recover.settle(call, backend, steps, since, _still_running_here)
        if call.record.served_by == "journal":  # it ran: a repeat of it is one (dedup)
            self.env.known_write(call, value)
        return value

    def _open(self, call: Call, backend: StateBackend, step: str) -> tuple[_Entry | None, Any, Any]:
        """The call's journal session and (`_ANSWERED`, answer), (`_WAIT`, the in-process
        run to wait for) or (`_RUN`, None) (store I/O: off the event loop when async)."""
        entry = _Entry(call, backend, step)
        try:
            verdict, found = entry.patiently(entry.begin)
            here = _running_here(entry.key, found) if verdict is Verdict.RUNNING else None
            if here is not None:
                return entry, _WAIT, here
            for _ in range(entry.polls() if verdict is Verdict.RUNNING else 0):
                testing.sleep(POLL_S)
                found = entry.patiently(entry.read)
                verdict = entry.judge(found)
                if verdict is not Verdict.RUNNING:
                    if verdict is Verdict.NEW:
                        entry.patiently(entry.take_over)
                    break
            answered, value = entry.answer(verdict, found)
        except BackendError as exc:
            _unreadable(call, exc)
            return None, _RUN, None
        except OrphanedWrite as exc:
            entry.write_receipt(exc=exc)  # a later resume is told the same
            self.env.known_write(call, None)  # a re-send keeps the call's key (dedup)
            raise
        if answered:  # it ran before its worker died: a repeat of it is one (dedup)
            self.env.known_write(call, value)
            return entry, _ANSWERED, value
        return entry, _RUN, value

    def _reopen_after(
        self, call: Call, backend: StateBackend, step: str
    ) -> tuple[_Entry | None, Any, Any]:
        """`_open` once the in-process run it waited for has finished (or not in time)."""
        entry, what, value = self._open(call, backend, step)
        if what is _WAIT:
            raise WriteInFlight()  # still running here past the deadline
        return entry, what, value

    def wrap(self, call: Call, call_next: Next) -> Any:
        step = step_of(call)
        backend = None if step is None else journal_backend(self.env, call, self._made)
        if backend is None or step is None:
            return call_next(call)
        entry, what, value = self._open(call, backend, step)
        if what is _WAIT:
            with contextlib.suppress(concurrent.futures.TimeoutError):
                value.result(timeout=_deadline.remaining_or_none(call))
            entry, what, value = self._reopen_after(call, backend, step)
        if what is _ANSWERED or entry is None:
            return value if what is _ANSWERED else call_next(call)
        call.journaled = True
        entry.start()
        try:
            value = call_next(call)
        except (GraphBubbleUp, Drained):  # not run: no entry kept
            entry.close(entry.forget)
            raise
        except Exception as exc:
            entry.close(entry.write_receipt, None, exc)
            raise
        except BaseException:
            entry.close(entry.abandon)
            raise
        entry.close(entry.write_receipt, value)
        return value

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        step = step_of(call)
        backend = None if step is None else journal_backend(self.env, call, self._made)
        if backend is None or step is None:
            return await call_next(call)
        remote = blocks(backend)  # a database: off the event loop
        entry, what, value = await off_loop(remote, self._open, call, backend, step)
        if what is _WAIT:
            left = _deadline.remaining_or_none(call)
            await asyncio.wait({asyncio.wrap_future(value)}, timeout=left)
            entry, what, value = await off_loop(remote, self._reopen_after, call, backend, step)
        if what is _ANSWERED or entry is None:
            return value if what is _ANSWERED else await call_next(call)
        call.journaled = True
        entry.start()
        try:
            value = await call_next(call)
        except (GraphBubbleUp, Drained):  # not run: no entry kept
            await off_loop(remote, entry.close, entry.forget)
            raise
        except Exception as exc:
            await off_loop(remote, entry.close, entry.write_receipt, None, exc)
            raise
        except BaseException:
            _abandon_now(entry, remote)  # cancelled: no further await
            raise
        await off_loop(remote, entry.close, entry.write_receipt, value)
        return value


def _unreadable(call: Call, exc: BackendError) -> None:
    """The journal's store failed before it could tell whether `call`'s write already
    ran: raise, or return to run it (marked for verify, or unjournaled)."""
    resolved = call.resolved
    if resolved.idempotent or resolved.rerun:  # sent again with its key, or safe to repeat
        fail(call, exc, "journal")  # "closed": not run; "open": run unjournaled
        return
    log.warning("journal: the entry of %s could not be read; its outcome is unknown", call.name)
    policy = resolved.policy
    if policy.unknown_outcome.verify is None or policy.shared.on_error == "closed":
        raise JournalUnreadable() from exc
    call.unsettled = JournalUnreadable()  # verify looks it up first


def _abandon_now(entry: _Entry, remote: bool) -> None:
    """Mark a cancelled write's intent without awaiting: in place for in-process state,
    else on one of the package's daemon threads (off the event loop, and never holding
    up an interpreter that exits)."""
    if remote:
        dispatch_pool().submit(lambda: entry.close(entry.abandon))
    else:
        entry.close(entry.abandon)
