"""The breaker on a shared `StateBackend`.

Each worker counts its own failures (its local `CircuitBreaker`); the worker that opens
the circuit publishes it, and from then on every worker refuses calls until
`recovery_time` has passed. Then the one worker that wins `claim` on the probe key sends
the half-open probe (others get ``circuit_open``); its verdict closes the circuit for
all or opens it again. A probe whose worker died is released when its lease
(`probe_lease`) ends. With N workers, at most N x `failure_threshold` calls fail before
all of them stop (usually `failure_threshold`).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from ...core.call import Call
from ...core.errors import BackendError, CircuitOpen
from ...state.backend import StateBackend
from ..shared import fail
from .machine import CLOSED, HALF_OPEN, OPEN, PROBE_BUSY_RETRY_S, CircuitBreaker, Ticket

log = logging.getLogger(__name__)

NS_BREAKER, NS_PROBE = "breaker", "probe"
OPEN_RECORD_TTL = 86400.0
"""Seconds an open-circuit record lives without a probe (it is removed on close)."""


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

    @property
    def state(self) -> str:
        """The state of this process's breaker of the tool (what the last call saw)."""
        return self.local.state

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
