"""The breaker, the dedup ledger and the caches on a shared `StateBackend`.

Stages ask `backend_for(env, call)`; `None` means in-process (their own fast cachetools
structures, the default). Otherwise:

- **Result and stale cache** (`SharedResultStore`): one entry per call key, written by
  whichever worker ran the call (last write wins). A store failure is a cache miss.
- **Breaker** (`SharedBreaker`): each worker counts its own failures (its local
  `CircuitBreaker`); the worker that opens the circuit publishes it, and from then on
  every worker refuses calls until `recovery_time` has passed. Then the one worker that
  wins `claim` on the probe key sends the half-open probe (others get ``circuit_open``);
  its verdict closes the circuit for all or opens it again. A probe whose worker died is
  released when its lease (`probe_lease`) ends. With N workers, at most N x
  `failure_threshold` calls fail before all of them stop (usually `failure_threshold`).
- **Dedup** (`shared_begin`): the first worker to `claim` the call key runs
  the call; a repeat anywhere sees the entry (``pending`` -> blocked for writes, its
  result -> reused). A repeat of a read still running elsewhere simply runs too.

A failing store raises `BackendError`; `ToolPolicy.on_backend_error` decides: ``"open"``
carries on with the worker's own breaker and dedup, ``"closed"`` answers
``transient_failure`` without running the tool.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..core.call import Call
from ..core.errors import CircuitOpen, StateUnavailable
from ..state.backend import BackendError, StateBackend
from ..state.choose import as_backend
from ..state.results import Entry as StoredResult
from .breaker.machine import CLOSED, HALF_OPEN, OPEN, PROBE_BUSY_RETRY_S, CircuitBreaker, Ticket
from .dedup.logic import Action, Entry, decide, effective_mode, scope_of

if TYPE_CHECKING:
    from .stage import Env


class LedgerOwner(Protocol):
    """What the shared ledger needs of the dedup stage that owns the call's entry (the
    stage's own bookkeeping of a finished, aborted or persisted call)."""

    def _end(self, call: Call, key: str, entry: Entry, value: Any, exc: Exception | None) -> None: ...

    def _abort(self, call: Call, entry: Entry) -> None: ...

    def _persist(self, call: Call, key: str, entry: Entry) -> None: ...

log = logging.getLogger(__name__)
T = TypeVar("T")

NS_RESULTS, NS_BREAKER, NS_PROBE, NS_DEDUP = "results", "breaker", "probe", "dedup"
OPEN_RECORD_TTL = 86400.0
"""Seconds an open-circuit record lives without a probe (it is removed on close)."""
_BACKENDS = "state_backends"


def backend_for(env: Env, call: Call) -> StateBackend | None:
    """The shared backend for `call` under its policy's `state_backend`, or `None`."""
    mode = call.resolved.policy.state_backend
    if mode == "local":
        return None
    backend: StateBackend | None = env.backend
    if backend is None and mode == "store" and call.store is not None:
        made: dict[int, tuple[Any, StateBackend | None]] = env.resources.setdefault(_BACKENDS, {})
        hit = made.get(id(call.store))
        if hit is None:  # the store is kept in the entry, so its id stays unique
            hit = made[id(call.store)] = (call.store, as_backend(call.store))
        backend = hit[1]
    return backend


async def off_loop(shared: bool, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` for an async call: on a worker thread when it touches a shared store
    (`shared`), so a slow or remote store never blocks the event loop and the other
    graphs and calls on it; in place otherwise (in-process state takes microseconds).

    A LangGraph async store (e.g. ``AsyncPostgresStore``) called from that thread runs
    its async methods on its own event loop.
    """
    if not shared:
        return fn(*args)
    return await asyncio.to_thread(fn, *args)


def fail(call: Call, exc: BackendError, what: str) -> None:
    """Handle a store failure per `on_backend_error`: log and go on, or raise."""
    if call.resolved.policy.on_backend_error == "closed":
        raise StateUnavailable() from exc
    log.warning("state store failed (%s of %s); carrying on in-process", what, call.name)


# -- result and stale cache ----------------------------------------------------------


class SharedResultStore:
    """A `state.results.ResultStore` on a backend: entries are ``(value, stored_at)``."""

    def __init__(self, backend: StateBackend, tool: str, retention: float) -> None:
        self.backend = backend
        self.clock = backend.clock
        self._tool = tool
        self._retention = retention

    def get(self, key: str, *, max_age: float) -> StoredResult | None:
        try:
            found = self.backend.get(NS_RESULTS, f"{self._tool}:{key}")
        except BackendError:
            log.warning("state store failed (cache read of %s): a miss", self._tool)
            return None
        if found is None or self.clock() - found[1] > max_age:
            return None
        return StoredResult(found[0], found[1])

    def put(self, key: str, value: Any) -> None:
        try:
            self.backend.put(
                NS_RESULTS, f"{self._tool}:{key}", (value, self.clock()), ttl=self._retention
            )
        except BackendError:
            log.warning("state store failed (cache write of %s): not kept", self._tool)


# -- breaker --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SharedProbe(Ticket):
    """The ticket of the worker that won the half-open probe of the circuit `gen`."""

    gen: str = ""


def probe_lease(call: Call) -> float:
    """How long a probe claim holds (longer than the probe call may take)."""
    policy = call.resolved.policy
    spec = policy.breaker
    assert spec is not None
    return max(spec.recovery_time, (policy.timeout or 60.0) + 1.0)


class SharedBreaker:
    """The breaker of one tool shared through a backend (one per call; cheap)."""

    def __init__(self, local: CircuitBreaker, backend: StateBackend, call: Call) -> None:
        self.local = local
        self.backend = backend
        self.call = call
        self.clock = local.clock
        """For slow-call timing (a local duration)."""

    def acquire(self) -> Ticket:
        tool = self.call.name
        try:
            record = self.backend.get(NS_BREAKER, tool)
            if record is None:
                return self.local.acquire()
            wait = record["until"] - self.backend.clock()
            if wait > 0:
                raise CircuitOpen(wait)
            if self.backend.claim(
                NS_PROBE, f"{tool}:{record['gen']}", 1, ttl=probe_lease(self.call)
            ):
                self._notify(OPEN, HALF_OPEN)
                return SharedProbe(True, -1, record["gen"])
        except BackendError as exc:
            fail(self.call, exc, "breaker read")
            return self.local.acquire()
        spec = self.call.resolved.policy.breaker
        assert spec is not None
        raise CircuitOpen(min(PROBE_BUSY_RETRY_S, spec.recovery_time))

    def release(self, ticket: Ticket, failed: bool | None) -> None:
        try:
            if isinstance(ticket, SharedProbe):
                self._end_probe(ticket, failed)
                return
            self.local.release(ticket, failed)
            if self.local.state == OPEN:  # this worker opened it: tell every worker
                self._publish()
                self.local.reset()
        except BackendError as exc:
            log.warning("state store failed (breaker update of %s): %s", self.call.name, exc)

    def _end_probe(self, ticket: SharedProbe, failed: bool | None) -> None:
        if failed:
            self._publish()
            self._notify(HALF_OPEN, OPEN)
        elif failed is None:  # no verdict: let another call probe now
            self.backend.delete(NS_PROBE, f"{self.call.name}:{ticket.gen}")
        else:
            self.backend.delete(NS_BREAKER, self.call.name)
            self._notify(HALF_OPEN, CLOSED)

    def _publish(self) -> None:
        spec = self.call.resolved.policy.breaker
        assert spec is not None
        record = {"until": self.backend.clock() + spec.recovery_time, "gen": uuid.uuid4().hex}
        self.backend.put(NS_BREAKER, self.call.name, record, ttl=OPEN_RECORD_TTL)

    def _notify(self, old: str, new: str) -> None:
        self.local.notify([(old, new)])


# -- dedup ----------------------------------------------------------------------------


def _ledger_key(call: Call, key: str) -> str:
    return f"{call.name}:{scope_of(call) or ''}:{key}"


def _restore(data: Any) -> Entry | None:
    if not isinstance(data, dict):
        return None
    if data.get("status") == "pending":
        return Entry(
            "pending",
            repeats=int(data.get("repeats") or 0),
            at=data.get("at") or 0.0,
            call_id=str(data.get("call_id") or ""),
        )
    return Entry.restore(data)


class _Shared:
    """One call's way through the shared ledger (decide once, then write the outcome)."""

    def __init__(self, stage: LedgerOwner, call: Call, key: str, backend: StateBackend) -> None:
        self.stage, self.call, self.key, self.backend = stage, call, key, backend
        self.lkey = _ledger_key(call, key)
        self.ttl = call.resolved.policy.dedup_ttl

    def begin(self) -> tuple[Action, Entry | None]:
        """The action; for RUN/WARN the pending entry of this call (now in the store)."""
        call, backend = self.call, self.backend
        mode = effective_mode(call.resolved.policy.dedup, call.idempotent)
        pending = Entry("pending", at=backend.clock(), call_id=call.id)
        if backend.claim(NS_DEDUP, self.lkey, pending.persisted(call.name), ttl=self.ttl):
            return Action.RUN, pending
        entry = _restore(backend.get(NS_DEDUP, self.lkey))
        action = decide(mode, call.idempotent, entry, call.id)
        if entry is None:  # gone between claim and get: run untracked
            return Action.WAIT, None
        if action is Action.WAIT and not call.idempotent:
            action = Action.BLOCK  # another worker runs this write now: nobody waits here
        if action is Action.REPLAY:
            return action, entry
        if action in (Action.RUN, Action.WARN):
            pending.repeats = entry.repeats + 1
            backend.put(NS_DEDUP, self.lkey, pending.persisted(call.name), ttl=self.ttl)
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
