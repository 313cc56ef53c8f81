"""One attempt's shared limits: its token from the tool's bucket in the store, and its
lease on one of the tool's slots there, renewed while it runs (`runtime.lease`).

The bucket and the slots are keyed by the tool's name: every worker that shares the
store, and every adapter in it, draws from the same ones. The lease's holder is unique
per attempt. A lease lasts `Limits.lease_s` and is renewed every third of that, so a
worker that dies gives its slots back within `lease_s`; a renewal that fails leaves the
lease to run out (the slot then counts as free before the attempt ends: said in a log).
"""

from __future__ import annotations

import logging
import threading
import uuid

from ...core.call import Call
from ...core.errors import BackendError
from ...runtime.lease import keeper
from ...state.limits import LimitBackend

log = logging.getLogger(__name__)


class SharedLimit:
    """The store operations of one attempt's shared limits, each a zero-argument method
    the drivers run (`core.Queue.steps`)."""

    __slots__ = ("_closed", "_lock", "_renewal", "backend", "burst", "cap", "held", "holder",
                 "key", "rate", "ttl")  # fmt: skip

    def __init__(self, backend: LimitBackend, call: Call) -> None:
        limits = call.resolved.policy.limits
        self.backend = backend
        self.key = call.name
        self.cap = limits.max_concurrency
        rate = limits.rate_limit
        self.rate = float(rate) if isinstance(rate, int | float) else None
        """The shared rate (`None`: none, or the user's own `BaseRateLimiter`)."""
        self.burst = float(limits.burst)
        self.ttl = limits.lease_s
        self.holder = uuid.uuid4().hex
        self.held = False
        """Whether the attempt holds its lease (to be released)."""
        self._closed = False
        self._renewal: int | None = None
        self._lock = threading.Lock()

    def take(self) -> float:
        """A token from the tool's bucket: ``0.0``, or the seconds until there is one."""
        assert self.rate is not None
        return self.backend.take_token(self.key, rate=self.rate, burst=self.burst)

    def acquire(self) -> bool:
        """A lease on one of the tool's slots; renewed from now on while it is held."""
        assert self.cap is not None
        got = self.backend.acquire_lease(self.key, cap=self.cap, holder=self.holder, ttl=self.ttl)
        with self._lock:
            late = got and self._closed  # the attempt ended (cancelled) while we asked
            if got and not late:
                self.held = True
                self._renewal = keeper.hold(self.renew, self.ttl / 3)
        if late:
            self._give_back()
        return got and not late

    def renew(self) -> None:
        """Called by the lease keeper while the attempt runs."""
        if not self.backend.renew_lease(self.key, holder=self.holder, ttl=self.ttl):
            log.warning("the shared slot of %s ran out before its attempt ended", self.key)

    def release(self) -> None:
        """Give the slot back (nothing when none is held); a store failure is logged: the
        lease then runs out within `Limits.lease_s`."""
        with self._lock:
            self._closed = True
            held, self.held = self.held, False
            if self._renewal is not None:
                keeper.release(self._renewal)
                self._renewal = None
        if held:
            self._give_back()

    def _give_back(self) -> None:
        try:
            self.backend.release_lease(self.key, holder=self.holder)
        except BackendError as exc:
            log.warning("state store failed (slot release of %s): %s", self.key, exc)
