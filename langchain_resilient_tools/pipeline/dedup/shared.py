"""The dedup ledger on a shared `StateBackend` (`shared_begin`).

The first worker to `claim` the call key runs the call; a repeat anywhere sees the entry
(``pending`` -> blocked for writes, its result -> reused). A repeat of a read still
running elsewhere simply runs too.

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

import logging
from typing import Any, Protocol

from ...core.call import Call
from ...core.errors import BackendError
from ...core.resume import position
from ...runtime.owner import alive, me
from ...state.backend import StateBackend
from ..shared import fail
from .logic import Action, Entry, Status, decide, effective_mode, scope_of

log = logging.getLogger(__name__)

NS_DEDUP = "dedup"


class LedgerOwner(Protocol):
    """What the shared ledger needs of the dedup stage that owns the call's entry (the
    stage's own bookkeeping of a finished, aborted or persisted call)."""

    def _end(self, call: Call, key: str, entry: Entry, value: Any, exc: Exception | None) -> None: ...

    def _abort(self, call: Call, entry: Entry) -> None: ...

    def _persist(self, call: Call, key: str, entry: Entry) -> None: ...


def _ledger_key(call: Call, key: str) -> str:
    return f"{call.name}:{scope_of(call) or ''}:{key}"


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
        if not alive(owner if isinstance(owner, dict) else None, float(data.get("lease_until") or 0), now):
            entry.status = _orphaned(call, entry)
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


class _Shared:
    """One call's way through the shared ledger (decide once, then write the outcome)."""

    def __init__(self, stage: LedgerOwner, call: Call, key: str, backend: StateBackend) -> None:
        self.stage, self.call, self.key, self.backend = stage, call, key, backend
        self.lkey = _ledger_key(call, key)
        self.ttl = call.resolved.policy.dedup.ttl_s

    def begin(self) -> tuple[Action, Entry | None]:
        """The action; for RUN/WARN the pending entry of this call (now in the store)."""
        call, backend = self.call, self.backend
        mode = effective_mode(call.resolved.policy.dedup.mode, call.idempotent)
        now = backend.clock()
        pos = position(call)
        pending = Entry("pending", at=now, call_id=call.id, pos=pos)
        if backend.claim(NS_DEDUP, self.lkey, _pending(call, pending, now), ttl=self.ttl):
            return Action.RUN, pending
        entry = _restore(backend.get(NS_DEDUP, self.lkey), call, now)
        action = decide(mode, call.idempotent, entry, call.id, pos)
        if entry is None:  # gone between claim and get: run untracked
            return Action.WAIT, None
        if action is Action.WAIT and not call.idempotent:
            action = Action.BLOCK  # another worker runs this write now: nobody waits here
        if action is Action.REPLAY:
            return action, entry
        if action in (Action.RUN, Action.WARN):
            pending.repeats = entry.repeats + 1
            backend.put(NS_DEDUP, self.lkey, _pending(call, pending, now), ttl=self.ttl)
            return action, pending
        entry.repeats += 1
        if action is not Action.WAIT:
            self.stage._persist(call, self.key, entry)
            if entry.status != "pending":
                backend.put(NS_DEDUP, self.lkey, entry.persisted(call.name), ttl=self.ttl)
        return action, entry

    def end(self, entry: Entry, value: Any, exc: Exception | None) -> None:
        self.stage._end(self.call, self.key, entry, value, exc)
        self._write(entry)

    def abort(self, entry: Entry) -> None:
        self.stage._abort(self.call, entry)
        self._write(entry)

    def _write(self, entry: Entry) -> None:
        try:
            if entry.status == "failed":  # nothing to keep: the next call may claim it
                self.backend.delete(NS_DEDUP, self.lkey)
            else:
                data = entry.persisted(self.call.name)
                self.backend.put(NS_DEDUP, self.lkey, data, ttl=self.ttl)
        except BackendError as exc:  # a write stays "pending" there until its TTL
            log.warning("state store failed (dedup update of %s): %s", self.call.name, exc)


def shared_begin(
    stage: LedgerOwner, call: Call, key: str, backend: StateBackend
) -> tuple[_Shared, Action, Entry | None] | None:
    """Decide `call` through the store: the ledger session, the action and the entry
    (`DedupStage` then runs the call as for a local ledger); `None` when the store
    failed and the policy fails open (the local ledger decides)."""
    shared = _Shared(stage, call, key, backend)
    try:
        action, entry = shared.begin()
    except BackendError as exc:
        fail(call, exc, "dedup")
        return None
    return shared, action, entry
