"""One write's journal session: the store operations the stage's drivers carry out.

An `Entry` is made per journaled call (its key and intent, computed once) and does the
I/O the core (`core`) names: `open` claims the intent, or reads what is there, waits
for another worker's receipt, and hands what it found to `core.decide`; `start` holds
the write's lease while it runs; `close` writes its end (`core.End`). Each store
operation is one round trip; one that only waits for another writer's lock
(`BackendError.lock_wait`) is tried again (`Entry.patiently`). Which writes this
process runs now is `running` (a re-run of the same call here waits for the first).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from ...core import testing
from ...core.call import Call
from ...core.errors import BackendError, OrphanedWrite, WriteInFlight
from ...core.idempotency import key_for
from ...runtime import deadline as _deadline
from ...runtime.lease import keeper
from ...runtime.owner import me
from ...state.backend import StateBackend
from ...state.choose import in_process
from ...text.classify import classify
from . import core, logic, running
from .core import (
    DO_WAIT,
    END_FORGET,
    END_RECEIPT,
    IS_NEW,
    IS_ORPHANED,
    IS_RUNNING,
    POLL_S,
    Do,
    End,
)
from .logic import NS_JOURNAL, Verdict

log = logging.getLogger(__name__)

LOCK_WAIT_TRIES = 30
"""At most this many tries of one journal operation while the store reports a lock."""
T = TypeVar("T")
_NO_INTENT: dict[str, Any] = {}
"""An `Entry`'s intent until `open` makes it (never written to)."""


def _lock_wait(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.lock_wait


class Entry:
    """One call's journal session: its backend, key and intent."""

    __slots__ = (
        "backend", "call", "digest", "handle", "intent", "key", "lease", "receipt", "run",
        "shared", "step", "ttl",
    )  # fmt: skip

    def __init__(self, call: Call, backend: StateBackend, step: str) -> None:
        resolved = call.resolved
        self.call, self.backend, self.step = call, backend, step
        self.key = logic.entry_key(call.name, key_for(call, step), step, rerun=resolved.rerun)
        self.lease, self.ttl = resolved.journal_lease_s, resolved.journal_ttl_s
        self.shared = not in_process(backend)
        """Whether another worker may read the entry: then the write's lease is renewed
        while it runs; else (process memory) it is held until the write ends (`start`)."""
        self.handle: int | None = None
        self.digest: str | None = None
        """The arguments' digest (`logic.args_digest`), once the first intent has it."""
        self.intent: dict[str, Any] = _NO_INTENT
        """The intent this session claims (made by `open`, on the store's clock)."""

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

    # -- opening: what is there, and what it means (`core.decide`) ------------------------

    def open(self) -> tuple[Do, Any]:
        """Claim the intent, or find what is there: what the driver does next, and with
        what (`core.Do`). Reads the store's clock: off the event loop, as the store."""
        call = self.call
        self.intent = logic.intent(
            call.name, call.args, owner=me(), now=self.backend.clock(),
            lease=self.lease if self.shared else self.ttl,
            step=self.step, digest=self.digest,
        )  # fmt: skip
        self.digest = self.intent["args"]
        try:
            verdict, found = self.patiently(self._begin)
            if verdict is IS_RUNNING:
                here = running.waiter(self.key, found)
                if here is not None:
                    return DO_WAIT, here
                verdict, found = self._wait_elsewhere(found)
            if verdict is IS_ORPHANED:
                self.patiently(self.take_over)  # the call goes on here: verify, or an answer
            return core.decide(self.call, verdict, found, self.backend.clock())
        except BackendError as exc:
            return core.unreadable(self.call, exc), None
        except OrphanedWrite as exc:
            self.write_receipt(exc=exc)  # a later resume is told the same
            raise

    def reopen(self) -> tuple[Do, Any]:
        """`open` again, once this process's run of the same write it waited for has
        ended (or not in time: `WriteInFlight`)."""
        do, value = self.open()
        if do is DO_WAIT:
            raise WriteInFlight()  # still running here past the deadline
        return do, value

    def _begin(self) -> tuple[Verdict, Any]:
        """Claim the key, or read what is there: (verdict, entry found)."""
        if self.claim():
            return IS_NEW, None
        found = self.read()
        verdict = self.judge(found)
        if verdict is IS_NEW:  # gone, unreadable or another call's: claim it over
            self.take_over()
        return verdict, found

    def _wait_elsewhere(self, found: Any) -> tuple[Verdict, Any]:
        """Read the entry another live worker holds until its receipt comes (or it is
        orphaned), within the call's deadline: (verdict, entry found)."""
        verdict = Verdict.RUNNING
        for _ in range(core.polls(self.call, self.lease)):
            testing.sleep(POLL_S)
            found = self.patiently(self.read)
            verdict = self.judge(found)
            if verdict is not Verdict.RUNNING:
                if verdict is Verdict.NEW:
                    self.patiently(self.take_over)
                break
        return verdict, found

    def judge(self, found: Any) -> Verdict:
        return logic.judge(found, self.backend.clock(), self.intent["args"])

    # -- the write's run ------------------------------------------------------------------

    def start(self) -> None:
        """The write is about to run here: mark it running in-process, and renew its lease
        while it runs where another worker reads it. In process memory, which only this
        process reads, its intent holds the lease for as long as the entry is kept (until
        the write's end replaces it: a receipt, its removal, or marked orphaned when cut
        short), which is what renewing it until then comes to, without the keeper."""
        self.run = running.started(self.key)
        if self.shared:
            self.handle = keeper.hold(self.renew, self.lease / 3)

    def close(self, end: End, exc: BaseException | None = None, value: Any = None) -> None:
        """The write ended: stop its lease (no renewal runs after this), then write its
        `end`, then wake whoever in this process waits for it."""
        if self.handle is not None:
            keeper.release(self.handle)
        try:
            if end is END_RECEIPT:
                self.write_receipt(value, exc if isinstance(exc, Exception) else None)
            elif end is END_FORGET:
                self.forget()
            else:
                self.abandon()
        finally:
            running.finished(self.key, self.run)

    # -- store operations (one round trip each) ------------------------------------------

    def claim(self) -> bool:
        return self.backend.claim(NS_JOURNAL, self.key, self.intent, ttl=self.ttl)

    def read(self) -> Any:
        return self.backend.get(NS_JOURNAL, self.key)

    def take_over(self) -> None:
        """Own the entry there (gone, another call's, or orphaned)."""
        self.backend.put(NS_JOURNAL, self.key, self.intent, ttl=self.ttl)

    def renew(self) -> None:
        self.intent = logic.renewed(self.intent, now=self.backend.clock(), lease=self.lease)
        self.backend.put(NS_JOURNAL, self.key, self.intent, ttl=self.ttl)

    def write_receipt(self, value: Any = None, exc: Exception | None = None) -> None:
        """The receipt, committed but not waited on to reach the disk (what a power loss
        takes leaves the intent: its outcome unknown, never run again)."""
        failure = None if exc is None else classify(exc, self.call)
        cap = self.call.resolved.max_chars
        self.receipt = logic.receipt(
            self.intent, now=self.backend.clock(), value=value, failure=failure, cap=cap
        )
        try:
            self.patiently(self._put_receipt, self.lease / 2)
        except BackendError:
            log.warning("journal: the receipt of %s was not written", self.call.name)

    def _put_receipt(self) -> None:
        put = getattr(self.backend, "put_unsynced", None) or self.backend.put
        put(NS_JOURNAL, self.key, self.receipt, ttl=self.ttl)

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
