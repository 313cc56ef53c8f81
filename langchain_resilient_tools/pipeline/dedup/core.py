"""Dedup's core: what the stage does with one call, decided without I/O.

A `Visit` is one call's way through the stage (`pipeline.dedup.stage` draws the path):
its facts, computed once (key, mode, scope), and what was decided so far. The stage's
drivers ask it what to do next (`Do`), do that one thing (wait, ask a ledger, run the
rest of the pipeline) and hand the result back (`Visit.start`, `twin_settled`, `told`;
`ran`, `failed`, `cut` give the `End` a ledger records). The visit never waits, never
runs anything and never reads or writes a ledger: a ledger (`Keeper`: `local`,
`shared`) reads an entry, decides with `logic.decide` and writes what it decided in one
step, and hands the `Ruling` over.
"""

from __future__ import annotations

import concurrent.futures
import enum
from typing import Any, NamedTuple, Protocol

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from ...core.call import Call
from ...core.errors import AttemptTimeout, DuplicateCall, OutcomeStillUnknown
from ...core.freshness import wrote
from ...core.idempotency import key_for_call
from ...core.key import call_key
from ...core.policy import DedupMode
from ...state.graph import has_ledger
from ...text import messages as m
from ...text.classify import is_unknown_outcome
from ...text.envelope import content_of, is_message_list
from ...text.redact import redact
from ...text.truncate import text_of
from .logic import Action, Entry, Status, block_reason, effective_mode, scope_of
from .twins import Group, Share


def resend_key(call: Call, earlier: Entry) -> str | None:
    """The idempotency key of the call that made `earlier`, which `call` sends again."""
    if not earlier.call_id:  # an entry kept without its call: the call keeps its own key
        return call.idempotency_key
    return key_for_call(call, earlier.call_id, earlier.pos)


_NOT_LANDED = object()


def landed_content(job: Any) -> Any:
    """What an attempt that had timed out answered when it ended: its result as message
    content if it succeeded (the write took effect), else `_NOT_LANDED`."""
    try:
        value = job.result()
    except BaseException:  # it failed after all: the outcome stays unknown
        return _NOT_LANDED
    if isinstance(value, Command) or is_message_list(value):
        return _NOT_LANDED
    if isinstance(value, ToolMessage):
        return _NOT_LANDED if value.status == "error" else value.content
    return content_of(value)


def settle_late(entry: Entry, end: End, lock: Any, then: Any = None) -> None:
    """Watch the attempt of `end` that runs on past its timeout: when it ends having
    taken effect, `entry` (a write's unknown outcome) becomes ``ok`` with its result,
    marked `Entry.landed`; `then(entry)` is called after (a store to update). Either
    way `entry.late` resolves, which wakes a re-send waiting for it."""
    landed: concurrent.futures.Future[None] = concurrent.futures.Future()
    entry.late = landed

    def done(job: Any) -> None:
        content = landed_content(job)
        with lock:
            if content is not _NOT_LANDED and entry.status == "unknown_outcome":
                entry.status, entry.content, entry.landed = "ok", content, True
                entry.told = False  # its re-send is answered with this result
        if content is not _NOT_LANDED and then is not None:
            then(entry)
        landed.set_result(None)

    end.late.add_done_callback(done)


class Do(enum.Enum):
    """What a driver does next for a call (`Visit`)."""

    WAIT_TWIN = "wait_twin"
    """Wait for the leader of the call's twins (`Visit.following`, at most `Visit.limit`),
    then hand back `Visit.twin_settled`."""
    ASK = "ask"
    """Ask the ledger (``ledger.begin(visit)``); hand its ruling to `Visit.told`."""
    WAIT_ENTRY = "wait_entry"
    """Wait for the identical call that runs now (`Visit.waiter`, at most `Visit.limit`),
    then ``ASK`` again."""
    ANSWER = "answer"
    """`Visit.answer` is the call's answer (returned, or raised)."""
    PASS = "pass"
    """Run the call untracked (the rest of the pipeline's answer is its answer)."""
    RUN = "run"
    """Run the call; hand its outcome to `Visit.ran`, `Visit.failed` or `Visit.cut`, and
    the `End` these give to the ledger (``ledger.end(visit, end)``)."""


class Keeper(Protocol):
    """A dedup ledger as the drivers use it: this pipeline's (`local.LocalLedger`) or the
    store's (`shared.SharedLedger`)."""

    remote: bool
    """Its operations are I/O (the async driver runs them off the event loop)."""

    def begin(self, visit: Visit) -> Ruling:
        """Read the entry of the call's key, decide (`logic.decide`), write what that says."""

    def end(self, visit: Visit, end: End) -> None:
        """Record how the call's run ended (in the ledger that decided it)."""


RUNS = (Action.RUN, Action.WARN, Action.RESEND)
"""The call runs, under a fresh ``pending`` entry that stands for it. (Tuples: an
`Enum` hashes in Python, a tuple compares by identity first.)"""
COUNTED = (Action.REUSE, Action.BLOCK)
"""The ledger answers: the earlier entry counts one more repeat (and is kept in state)."""


class Ruling(NamedTuple):
    """What a ledger said about a call (`logic.decide`'s action, applied to its entry)."""

    action: Action
    entry: Entry | None
    """The entry that now stands for the call (``RUN``/``WARN``: its fresh pending
    entry), or the earlier one that answers it; `None` when the store lost it."""
    waiter: concurrent.futures.Future[None] | None = None
    """``WAIT``: resolved when the identical call that runs now ends."""
    age: float | None = None
    """``REUSE`` and ``BLOCK`` (a counted repeat; read by the reuse's notice): the
    seconds (ledger clock) since the earlier call was made (`logic.age_of`); `None`
    when the ledger does not know."""
    resends: Entry | None = None
    """``RESEND``: the earlier entry whose call this one sends again (its idempotency key
    is the one the call runs with)."""


class End(NamedTuple):
    """How a call that ran ended, as its ledger records it."""

    status: Status
    content: Any = None
    """The result as message content (``ok`` only): what a repeat is answered with."""
    keep: bool = True
    """Also kept in graph state (`graph_state.persist`)."""
    told: bool = True
    """The model is told this end (`Entry.told`): not for a write cut short."""
    late: Any = None
    """For an unknown outcome after a timeout: the attempt still running on its thread
    (`AttemptTimeout.late`), which the ledger watches (`landed_content`)."""


class Visit:
    """One call's way through the dedup stage: its facts and what was decided so far."""

    __slots__ = (
        "call", "following", "grouped", "key", "leading", "mode", "ruling", "scope", "share",
        "shown", "waited",
    )  # fmt: skip

    def __init__(self, call: Call, key: str, mode: DedupMode, scope: str) -> None:
        self.call = call
        self.key = key
        """The call's key (`core.key.call_key`): who asks what."""
        self.mode = mode
        """`Dedup.mode`, resolved (`logic.effective_mode`)."""
        self.scope = scope
        """Who shares the ledger (`logic.scope_of`)."""
        self.grouped = not call.twinless and call.step is not None and mode != "warn"
        """The call may have identical siblings in its step that share its outcome
        (`pipeline.dedup.twins`); ``warn`` runs each of them, as the user asked."""
        self.following: Group | None = None
        """The group of twins whose leader this call waits for."""
        self.leading: Group | None = None
        """The group of twins this call runs for (settled with `share` on the way out)."""
        self.ruling: Ruling | None = None
        self.waited = False
        self.shown = 0
        """How many notices the call had when it started to run."""
        self.share: Share | None = None
        """What this call's twins take of its outcome (`None`: the ledger answers them)."""

    @classmethod
    def of(cls, call: Call) -> Visit | None:
        """`call`'s visit; `None` when dedup has nothing to decide for it: its mode is
        ``off``, or it has no scope (`scope_of`), or, with no thread and no ledger in its
        state, nothing identical in its step (`Call.twinless`)."""
        mode = effective_mode(call.resolved.dedup_mode, call.resolved.idempotent)
        if mode == "off":
            return None
        if call.twinless and not call.thread_id and not has_ledger(call.state):
            return None  # scoped by its message, which holds nothing identical
        scope = scope_of(call)
        if scope is None:
            return None
        return cls(call, call_key(call), mode, scope)

    @property
    def limit(self) -> float:
        """How long the call waits for a twin or an identical call: the whole budget of
        that call (every attempt's timeout)."""
        policy = self.call.resolved.policy
        return (policy.timeout or 60.0) * policy.retry.max_attempts + 1.0

    @property
    def twin(self) -> Group:
        """The group of twins whose leader this call waits for (``WAIT_TWIN``)."""
        assert self.following is not None
        return self.following

    @property
    def waiter(self) -> concurrent.futures.Future[None]:
        """What ends when the identical call that runs now ends (``WAIT_ENTRY``)."""
        assert self.ruling is not None and self.ruling.waiter is not None
        return self.ruling.waiter

    # -- in -------------------------------------------------------------------------

    def start(self, joined: tuple[Group, bool] | None) -> Do:
        """The first thing to do, given the call's group of twins and whether it runs
        for it (`twins.Twins.join`; `None`: not grouped)."""
        if joined is None:
            return Do.ASK
        group, leads = joined
        if leads:
            self.leading = group
            return Do.ASK
        self.following = group
        return Do.WAIT_TWIN if not group.settled else self.twin_settled()

    def twin_settled(self) -> Do:
        """The leader settled (or the wait ran out): take its share, or ask the ledger,
        as for any repeat."""
        group = self.following
        if group is not None and group.share is not None:
            return Do.ANSWER
        self.following = None
        return Do.ASK

    def told(self, ruling: Ruling) -> Do:
        """What the ledger said: answer, wait for an identical call (once), or run."""
        self.ruling = ruling
        action = ruling.action
        if ruling.waiter is not None and not self.waited:
            self.waited = True
            return Do.WAIT_ENTRY
        if action in RUNS:
            if ruling.resends is not None:  # sent again: as the same request
                self.call.idempotency_key = resend_key(self.call, ruling.resends)
            if action is Action.WARN:
                assert ruling.entry is not None
                self._notice(ruling.entry, m.DEDUP_WARN)
            self.shown = len(self.call.record.notices)
            return Do.RUN
        if action is Action.WAIT and self.call.resolved.idempotent:
            return Do.PASS  # still running after the wait: this read runs too, untracked
        return Do.ANSWER  # reuse, replay, block; a write still running: never twice

    def answer(self) -> Any:
        """The call's answer when it does not run (raised when it is a failure)."""
        call = self.call
        if self.following is not None:
            share = self.following.share
            assert share is not None
            return share.answer(call)
        assert self.ruling is not None
        action, entry = self.ruling.action, self.ruling.entry
        if action is Action.WAIT:
            if entry is not None and entry.status == "unknown_outcome":  # still landing
                raise DuplicateCall(previous=None, repeats=entry.repeats, reason="in_flight")
            raise OutcomeStillUnknown()
        assert entry is not None
        if action is Action.REPLAY:
            if entry.status == "unknown_outcome":
                raise OutcomeStillUnknown()
            call.record.served_by = "dedup"
            return entry.content
        if action is Action.REUSE:
            call.record.served_by = "dedup"
            if entry.landed:  # a re-send of a write that took effect after all
                call.record.notices.append(m.DEDUP_LANDED.format(tool=call.name))
            else:
                self._notice(entry, m.DEDUP_REUSED, age=m.reused_age(self.ruling.age))
            return entry.content
        previous = None if entry.content is None else redact(text_of(entry.content), limit=300)
        raise DuplicateCall(
            previous=previous,
            repeats=entry.repeats,
            looping=self._looping(entry),
            reason=block_reason(entry),
            age=self.ruling.age,
        )

    def _looping(self, entry: Entry) -> bool:
        return entry.repeats >= self.call.resolved.policy.dedup.looping_after

    def _notice(self, entry: Entry, template: str, **more: str) -> None:
        notices = self.call.record.notices
        notices.append(template.format(tool=self.call.name, n=entry.repeats, **more))
        if self._looping(entry):
            notices.append(m.DEDUP_LOOPING.format(n=entry.repeats))

    # -- out ------------------------------------------------------------------------

    def ran(self, value: Any) -> End:
        """The call answered `value`: what its ledger keeps, and what its twins take."""
        record = self.call.record
        # The tool's, the cache's or what a lookup found the write did (it took effect:
        # a repeat of it is one); not a fallback's, nor stale data.
        fresh = record.served_by in _KEPT
        if fresh and isinstance(value, Command):
            return _DONE  # kept, but not replayed: a Command answers its own call id only
        if fresh and not (isinstance(value, ToolMessage) and value.status == "error"):
            content = value.content if isinstance(value, ToolMessage) else content_of(value)
            return End("ok", content)  # the ledger answers the twins
        if not isinstance(value, Command) and not is_message_list(value):
            # Nothing to keep: the twins take this same answer, with the notices the
            # stages inside dedup added to it.
            shown = tuple(record.notices[self.shown :])
            self.share = Share(value=value, served_by=record.served_by, notices=shown)
        return _FAILED

    def failed(self, exc: Exception) -> End:
        """The call failed with `exc`: the one place where dedup classifies an exception.
        A write whose outcome is unknown blocks its repeats (and its twins, never asked
        about twice); any other failure is not kept, and its twins share it, unless it
        is LangGraph control flow (each twin then goes its own way)."""
        if isinstance(exc, GraphBubbleUp):
            return _FAILED
        if is_unknown_outcome(exc, self.call):
            late = exc.late if isinstance(exc, AttemptTimeout) else None
            if late is None:
                return _UNKNOWN
            thread = self.call.thread_id
            if thread:  # when it lands, the reads made meanwhile are stale too
                late.add_done_callback(lambda _: wrote(thread))
            return End("unknown_outcome", late=late)
        self.share = Share(exc=exc)
        return _FAILED

    def cut(self) -> End:
        """The call was cut short (cancelled) mid-run: a write may have taken effect, a
        read simply failed. Recorded in the ledger only, not in graph state."""
        return _FAILED if self.call.resolved.idempotent else _CUT_WRITE


_KEPT = frozenset({"tool", "cache", "verify"})
"""Who answered a call whose answer the ledger keeps (`Visit.ran`)."""
_FAILED = End("failed", keep=False)
_UNKNOWN = End("unknown_outcome")
_DONE = End("done")
_CUT_WRITE = End("unknown_outcome", keep=False, told=False)
