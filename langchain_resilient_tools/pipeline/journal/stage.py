"""The write journal: a worker that dies mid-write never makes the write run again silently.

Writes only (`applies`), in a step a run can resume (`core.resume.step_of`: a thread of a
graph with a checkpointer; a call without one runs unjournaled: nothing could resume
it, and no entry may answer a later run that reuses its call id), with a journal
backend (`where.journal_backend`). Entries are kept per step of the thread, and answer
only a call with the same arguments (`logic.judge`). Before the
write runs, its intent is claimed under the call's idempotency key (one round trip);
while it runs, its lease is renewed where another worker reads the entry (`runtime.lease`,
only for writes that outlast a third of the lease; in process memory the intent holds it
until the write ends: `entry.Entry.start`); when it answers, the receipt is written (one
round trip). The
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

One core decides (`core`: what an entry found means, what a write's end leaves), one
session per write does the store's I/O (`entry.Entry`), and two thin drivers (sync
`wrap`, async `awrap`) do what it names (`core.Do`): ``ANSWER``, ``PASS`` (run
unjournaled), ``WAIT`` (this process runs the same write now: wait, then open again),
``RUN`` (then close the session with its `core.End`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Sequence
from typing import Any

from ...core.call import Call
from ...core.errors import OrphanedWrite
from ...core.policy import ResolvedPolicy
from ...core.resume import step_of
from ...runtime import deadline as _deadline
from ...runtime.executor import dispatch_pool
from ...state.choose import blocks
from ..stage import AsyncNext, Env, Next, Stage
from . import recover, running
from .core import DO_ANSWER, DO_PASS, DO_WAIT, END_RECEIPT, Do, End, ending
from .entry import Entry
from .where import Made, journal_backend


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
        value = recover.settle(call, backend, steps, since, running.still_running)
        if call.record.served_by == "journal":  # it ran: a repeat of it is one (dedup)
            self.env.known_write(call, value)
        return value

    def _entry(self, call: Call) -> Entry | None:
        """`call`'s journal session; `None` when it runs unjournaled (no resumable step,
        or nowhere to keep its journal)."""
        step = step_of(call)
        if step is None:
            return None
        backend = journal_backend(self.env, call, self._made)
        return None if backend is None else Entry(call, backend, step)

    def _open(self, entry: Entry, again: bool = False) -> tuple[Do, Any]:
        """`entry.open` (`again`: `entry.reopen`), telling dedup of a write the journal
        answers (`Env.known_write`)."""
        try:
            do, value = entry.reopen() if again else entry.open()
        except OrphanedWrite:
            self.env.known_write(entry.call, None)  # a re-send keeps the call's key (dedup)
            raise
        if do is DO_ANSWER:  # it ran before its worker died: a repeat of it is one (dedup)
            self.env.known_write(entry.call, value)
        return do, value

    # -- the sync driver -----------------------------------------------------------

    def wrap(self, call: Call, call_next: Next) -> Any:
        entry = self._entry(call)
        if entry is None:
            return call_next(call)
        do, value = self._open(entry)
        if do is DO_WAIT:
            with contextlib.suppress(concurrent.futures.TimeoutError):
                value.result(timeout=_deadline.remaining_or_none(call))
            do, value = self._open(entry, True)
        if do is DO_ANSWER:
            return value
        if do is DO_PASS:
            return call_next(call)
        call.journaled = True
        entry.start()
        try:
            value = call_next(call)
        except BaseException as exc:
            entry.close(ending(exc), exc)
            raise
        entry.close(END_RECEIPT, None, value)
        return value

    # -- the async driver ----------------------------------------------------------

    async def awrap(self, call: Call, call_next: AsyncNext) -> Any:
        entry = self._entry(call)
        if entry is None:
            return await call_next(call)
        remote = blocks(entry.backend)  # a database: off the event loop
        do, value = self._open(entry) if not remote else await asyncio.to_thread(self._open, entry)
        if do is DO_WAIT:
            left = _deadline.remaining_or_none(call)
            await asyncio.wait({asyncio.wrap_future(value)}, timeout=left)
            if remote:
                do, value = await asyncio.to_thread(self._open, entry, True)
            else:
                do, value = self._open(entry, True)
        if do is DO_ANSWER:
            return value
        if do is DO_PASS:
            return await call_next(call)
        call.journaled = True
        entry.start()
        try:
            value = await call_next(call)
        except BaseException as exc:
            end = ending(exc)
            if end is End.ABANDON:  # cancelled: no further await
                _abandon_now(entry, remote)
            elif remote:
                await asyncio.to_thread(entry.close, end, exc)
            else:
                entry.close(end, exc)
            raise
        if remote:
            await asyncio.to_thread(entry.close, END_RECEIPT, None, value)
        else:
            entry.close(END_RECEIPT, None, value)
        return value


def _abandon_now(entry: Entry, remote: bool) -> None:
    """Mark a cancelled write's intent without awaiting: in place for in-process state,
    else on one of the package's daemon threads (off the event loop, and never holding
    up an interpreter that exits)."""
    if remote:
        dispatch_pool().submit(lambda: entry.close(End.ABANDON))
    else:
        entry.close(End.ABANDON)
