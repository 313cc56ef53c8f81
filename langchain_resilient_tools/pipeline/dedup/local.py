"""This pipeline's own dedup ledger: one `logic.Ledger` per tool, in memory, under a lock.

`begin` reads the entry of a call's key (from memory, else from the graph state's
``tool_ledger``, `graph_state.state_entry`), asks `logic.decide` and writes what it says
in the same turn of the lock: a fresh ``pending`` entry for a call that runs, one more
repeat on the entry that answers it, or a future to wait on for an identical read that
runs now. `end` records how a run ended and wakes the calls waiting for it.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable

from ...core.call import Call
from ...core.resume import position
from .core import COUNTED, RUNS, End, Ruling, Visit, settle_late
from .graph_state import forget_if_gone, persist, state_entry
from .logic import Action, Entry, Ledger, age_of, decide, landing, resent


class LocalLedger:
    """The calls this pipeline has seen, per tool; thread-safe."""

    __slots__ = ("_lock", "clock", "landings", "ledgers")

    remote = False
    """Its operations take microseconds: the async driver runs them on the loop."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        """The ledgers' clock (wall time, so that entries in graph state age across restarts)."""
        self.ledgers: dict[str, Ledger] = {}
        self.landings: dict[str, Entry] = {}
        """Writes of a shared ledger (by its key) whose timed-out attempt still runs in
        this process (`pipeline.dedup.shared`); each leaves when its attempt ends."""

    def watch(self, key: str, entry: Entry, end: End, then: Callable[[Entry], None]) -> None:
        """Watch `end`'s attempt, still running past its timeout, for a shared ledger's
        `entry` under `key` (`core.settle_late`); `then` writes the landed entry."""
        with self._lock:
            self.landings[key] = entry
        settle_late(entry, end, self._lock, then=then)
        assert entry.late is not None
        entry.late.add_done_callback(lambda _: self.landings.pop(key, None))

    def _ledger(self, call: Call) -> Ledger:
        ledger = self.ledgers.get(call.name)
        if ledger is None:
            options = call.resolved.policy.dedup
            ledger = Ledger(ttl=options.ttl_s, max_entries=options.max_entries, clock=self.clock)
            self.ledgers[call.name] = ledger
        return ledger

    def begin(self, visit: Visit) -> Ruling:
        """Decide `visit`'s call and write what was decided (one turn of the lock)."""
        call, key = visit.call, visit.key
        scoped = (visit.scope, key)
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
            action = decide(visit.mode, call.resolved.idempotent, entry, call.id, pos)
            if landing(action, entry):  # the timed-out attempt may yet take effect
                assert entry is not None and entry.late is not None
                return Ruling(Action.WAIT, entry, entry.late)
            if action in RUNS:
                earlier = entry
                entry = Entry(
                    "pending", repeats=0 if earlier is None else earlier.repeats + 1,
                    at=ledger.clock(), call_id=call.id, step=call.step, pos=pos,
                )  # fmt: skip
                ledger.put(scoped, entry)
                return Ruling(action, entry, resends=resent(action, earlier))
            assert entry is not None
            if action is Action.WAIT:
                if entry.done is None:
                    entry.done = concurrent.futures.Future()  # made only when someone waits
                return Ruling(action, entry, entry.done)
            if action in COUNTED:
                entry.repeats += 1
                entry.told = True  # this answer tells the model (an unknown outcome too)
                persist(call, key, entry)
            return Ruling(action, entry, age=age_of(entry, ledger.clock()))

    def learn(self, visit: Visit, end: End) -> None:
        """Record `end` for `visit`'s call, which dedup did not see run (a stage outside
        it answered: the journal, from a receipt), unless the ledger or the graph state
        knows the key already: its repeats are then decided as if it had run here."""
        call, key = visit.call, visit.key
        scoped = (visit.scope, key)
        with self._lock:
            ledger = self._ledger(call)
            if ledger.get(scoped) is not None or state_entry(call.state, key) is not None:
                return
            entry = Entry(
                end.status, content=end.content, at=ledger.clock(), call_id=call.id,
                step=call.step, pos=position(call), told=end.told,
            )  # fmt: skip
            ledger.put(scoped, entry)
        persist(call, key, entry)

    def end(self, visit: Visit, end: End) -> None:
        """Record how `visit`'s run ended; wake the calls waiting for it."""
        entry = visit.ruling.entry if visit.ruling is not None else None
        assert entry is not None, "only a call that runs under an entry ends"
        with self._lock:
            entry.status, entry.content, entry.told = end.status, end.content, end.told
            done, entry.done = entry.done, None
        if end.late is not None:  # outside the lock: an attempt that ended already
            settle_late(entry, end, self._lock)  # calls back at once, and takes it
        if done is not None:
            done.set_result(None)
        if end.keep:
            persist(visit.call, visit.key, entry)
