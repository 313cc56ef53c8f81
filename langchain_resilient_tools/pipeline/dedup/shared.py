"""The dedup ledger on a shared `StateBackend` (`SharedLedger`).

The first worker to `claim` the call key runs the call; a repeat anywhere sees the entry
(``pending`` -> blocked for writes, its result -> reused). A repeat of a read still
running elsewhere simply runs too, and so does one made before a write took effect in
the thread, in any worker (`SharedLedger._written_since`: the write leaves its time
under ``~wrote:<scope>``; this worker's own writes are in the key, `core.freshness`).

A ``pending`` entry names its owner and a lease (the call's deadline): an entry whose
owner is gone (`runtime.owner`: a dead process on this host, or a lease run out) is not
"still running". For a read it is as if it failed (the read runs); for a write its
outcome is unknown: a repeat is blocked as ``unknown_outcome``, and the same call run
again (a resume) is answered ``unknown_outcome``. A write the journal let run
(`Call.journaled`: its first run, or a resumed one the journal settled, `pipeline.journal`)
is not held back by a pending entry of its own call id, whoever owns it: the journal,
which knows the write's owner and lease, decided.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from ...core.call import Call
from ...core.errors import BackendError
from ...core.resume import position
from ...runtime.owner import alive, me
from ...state.backend import StateBackend
from ..shared import fail
from .core import COUNTED, RUNS, End, Ruling, Visit
from .graph_state import persist
from .local import LocalLedger
from .logic import Action, Entry, Status, age_of, decide, landing, resent, scope_of

log = logging.getLogger(__name__)

NS_DEDUP = "dedup"


def _ledger_key(call: Call, key: str) -> str:
    return f"{call.name}:{scope_of(call) or ''}:{key}"


def _wrote_key(call: Call) -> str:
    """Where the store keeps when a write last took effect in `call`'s thread."""
    return f"~wrote:{scope_of(call) or ''}"


def _restore(data: Any, call: Call, now: float) -> Entry | None:
    if not isinstance(data, dict):
        return None
    if data.get("status") == "pending":
        entry = Entry(
            "pending",
            repeats=int(data.get("repeats") or 0),
            at=data.get("at") or 0.0,
            call_id=str(data.get("call_id") or ""),
            pos=data.get("pos") or None,
        )
        if entry.call_id == call.id and call.journaled:
            entry.status = "failed"  # the journal settled this very write: let it run
            return entry
        owner = data.get("owner")
        if not alive(
            owner if isinstance(owner, dict) else None, float(data.get("lease_until") or 0), now
        ):
            entry.status = _orphaned(call, entry)
            entry.told = False  # nobody told the model: its first repeat is blocked, and told
        return entry
    return Entry.restore(data)


def _orphaned(call: Call, entry: Entry) -> Status:
    """What a pending entry whose owner is gone stands for, to `call`."""
    return "failed" if call.idempotent else "unknown_outcome"  # a read runs; a write may have


def _pending(call: Call, entry: Entry, now: float) -> dict[str, Any]:
    """The stored form of this worker's pending entry: with its owner and its lease."""
    policy = call.resolved.policy
    lease = policy.call_deadline_s or policy.dedup.ttl_s
    return {**entry.persisted(call.name), "owner": me(), "lease_until": now + lease}


class SharedLedger:
    """The dedup ledger on a store shared by the workers, for one call: decide
    (`begin`), then write how the run ended (`end`). When the store fails and the policy
    fails open, this pipeline's own ledger decides instead, and is told the end."""

    __slots__ = ("backend", "fallen", "lkey", "local", "ttl")

    remote = True
    """Its operations are I/O: the async driver runs them off the event loop."""

    def __init__(self, local: LocalLedger, backend: StateBackend) -> None:
        self.local, self.backend = local, backend
        self.lkey = ""
        self.ttl = 0.0
        self.fallen = False
        """The store failed: this pipeline's own ledger decided."""

    def begin(self, visit: Visit) -> Ruling:
        """`visit`'s ruling; for RUN/WARN its pending entry is now in the store."""
        try:
            self.fallen = False
            return self._begin(visit)
        except BackendError as exc:
            fail(visit.call, exc, "dedup")
            self.fallen = True
            return self.local.begin(visit)

    def _begin(self, visit: Visit) -> Ruling:
        call, backend = visit.call, self.backend
        self.lkey = _ledger_key(call, visit.key)
        self.ttl = ttl = call.resolved.policy.dedup.ttl_s
        now = backend.clock()
        pos = position(call)
        pending = Entry("pending", at=now, call_id=call.id, pos=pos)
        if backend.claim(NS_DEDUP, self.lkey, _pending(call, pending, now), ttl=ttl):
            return Ruling(Action.RUN, pending)
        entry = _restore(backend.get(NS_DEDUP, self.lkey), call, now)
        if entry is None:  # gone between claim and get: run untracked
            return Ruling(Action.WAIT, None)
        # A pending write of this very call runs in some worker: blocked, never waited for.
        action = decide(visit.mode, call.resolved.idempotent, entry, call.id, pos, here=False)
        if action is Action.REUSE and self._written_since(call, entry):
            action = Action.RUN  # a write took effect in another worker since: stale
        watched = self.local.landings.get(self.lkey) if action is Action.RESEND else None
        if watched is not None and landing(action, watched):  # its attempt runs here still
            assert watched.late is not None
            return Ruling(Action.WAIT, watched, watched.late)
        if action in RUNS:
            pending.repeats = entry.repeats + 1
            backend.put(NS_DEDUP, self.lkey, _pending(call, pending, now), ttl=ttl)
            return Ruling(action, pending, resends=resent(action, entry))
        if action in COUNTED:
            entry.repeats += 1
            entry.told = True  # this answer tells the model (an unknown outcome too)
            persist(call, visit.key, entry)
            if entry.status != "pending":
                backend.put(NS_DEDUP, self.lkey, entry.persisted(call.name), ttl=ttl)
        return Ruling(action, entry, age=age_of(entry, now))

    def _written_since(self, call: Call, entry: Entry) -> bool:
        """Whether a write took effect in `call`'s thread, in any worker, after `entry`
        was made (`_wrote_key`; this worker's own writes are in the key already,
        `core.freshness`)."""
        if not call.thread_id:
            return False
        marker = self.backend.get(NS_DEDUP, _wrote_key(call))
        at = marker.get("at") if isinstance(marker, dict) else None
        return isinstance(at, int | float) and at >= entry.at

    def end(self, visit: Visit, end: End) -> None:
        """Record how `visit`'s run ended, here and in the store."""
        if self.fallen:
            return self.local.end(visit, end)
        entry = visit.ruling.entry if visit.ruling is not None else None
        assert entry is not None, "only a call that runs under an entry ends"
        entry.status, entry.content, entry.told = end.status, end.content, end.told
        if end.keep:
            persist(visit.call, visit.key, entry)
        call = visit.call
        try:
            if entry.status == "failed":  # nothing to keep: the next call may claim it
                self.backend.delete(NS_DEDUP, self.lkey)
            else:
                data = entry.persisted(call.name)
                self.backend.put(NS_DEDUP, self.lkey, data, ttl=self.ttl)
            if end.late is not None:  # a timed-out attempt runs on: it may yet land
                lkey, ttl, backend = self.lkey, self.ttl, self.backend

                def landed(found: Entry) -> None:
                    with contextlib.suppress(BackendError):
                        backend.put(NS_DEDUP, lkey, found.persisted(call.name), ttl=ttl)

                self.local.watch(lkey, entry, end, landed)
            if entry.status != "failed" and not call.idempotent and call.thread_id:
                wrote = {"at": self.backend.clock()}  # it may have taken effect: reads stale
                self.backend.put(NS_DEDUP, _wrote_key(call), wrote, ttl=self.ttl)
        except BackendError as exc:  # a write stays "pending" there until its TTL
            log.warning("state store failed (dedup update of %s): %s", call.name, exc)
