"""The journal's core: what the stage does with one write, decided without I/O.

The stage's drivers (`stage.JournalStage.wrap`, ``awrap``) open the write's journal
session (`entry.Entry.open`: the store's claim, or what is there) and are told what to
do (`Do`); when a write they ran ends, `ending` names what its session writes
(`End`). What an entry found means is decided here (`decide`, from `logic.judge`'s
verdict), as is what a store that fails before it could tell means (`unreadable`).
Nothing here reads or writes a store, waits or runs a tool.
"""

from __future__ import annotations

import enum
import logging
import math
from typing import Any

from langgraph.errors import GraphBubbleUp

from ...core.call import Call
from ...core.errors import (
    BackendError,
    Drained,
    JournalUnreadable,
    OrphanedWrite,
    Recorded,
    WriteInFlight,
)
from ...runtime import deadline as _deadline
from ...text import messages as m
from ..shared import fail
from .logic import Verdict

log = logging.getLogger(__name__)

POLL_S = 0.1
"""Seconds between two reads of a write another live worker is running."""


class Do(enum.Enum):
    """What a driver does next with a write (`entry.Entry.open`)."""

    ANSWER = "answer"
    """The journal answers: the value given with it (a failure is raised instead)."""
    PASS = "pass"
    """Run the call unjournaled (the store failed and the policy lets it run so)."""
    WAIT = "wait"
    """This process runs the same write now: wait for the future given with it (within
    the call's deadline), then open again (`entry.Entry.reopen`)."""
    RUN = "run"
    """The intent is claimed: start the session (its lease), run the call, and close
    the session as `ending` says (or `End.RECEIPT` with its value)."""


class End(enum.Enum):
    """What the session of a write that ran writes when it ends."""

    RECEIPT = "receipt"
    """How it ended (its answer, or its failure): the receipt (`logic.receipt`)."""
    FORGET = "forget"
    """It did not run (LangGraph control flow raised in it, or the run is draining):
    the intent is removed, so the tool runs on resume."""
    ABANDON = "abandon"
    """It was cut short (cancelled): the intent is marked orphaned (`logic.abandoned`)."""


# The members the journal's modules compare with on every write, bound once here: on
# Python 3.11 an enum's attribute is looked up through its metaclass (about 80 ns, six
# times a module name's; about 13 per write).
DO_ANSWER, DO_PASS, DO_WAIT, DO_RUN = Do.ANSWER, Do.PASS, Do.WAIT, Do.RUN
IS_NEW, IS_RECEIPT = Verdict.NEW, Verdict.RECEIPT
IS_ORPHANED, IS_RUNNING = Verdict.ORPHANED, Verdict.RUNNING
END_RECEIPT, END_FORGET = End.RECEIPT, End.FORGET


def ending(exc: BaseException) -> End:
    """What a write that raised `exc` leaves in its journal."""
    if isinstance(exc, GraphBubbleUp | Drained):
        return End.FORGET
    if isinstance(exc, Exception):
        return End.RECEIPT
    return End.ABANDON


def polls(call: Call, lease: float) -> int:
    """How many reads a wait for another worker's receipt may take: within what is left
    of the call's deadline, else three leases."""
    left = _deadline.remaining(call)
    bound = 3 * lease if left is None else max(0.0, left)
    return math.ceil(bound / POLL_S)


def decide(call: Call, verdict: Verdict, found: Any, now: float) -> tuple[Do, Any]:
    """What the entry `found` under the call's key means (`verdict`, read at `now`;
    an orphaned entry is the call's own by now): answer (``ANSWER``, or raised), or run
    (``RUN``). A write another worker still runs past the wait is `WriteInFlight`."""
    if verdict is IS_RECEIPT:
        call.record.served_by = "journal"
        if found.get("outcome") == "error":
            raise Recorded(found.get("failure") or {})
        call.record.notices.append(m.JOURNAL_REPLAY)
        return Do.ANSWER, found.get("content") or ""
    if verdict is IS_ORPHANED:
        resolved = call.resolved
        ago = max(0.0, now - float(found.get("started") or 0.0))
        if resolved.idempotent:  # a keyed write, or one declared safe to repeat
            keyed = resolved.policy.idempotency_key is not False
            call.record.notices.append(m.JOURNAL_RESENT if keyed else m.JOURNAL_RESENT_SAFE)
            return DO_RUN, None
        if resolved.policy.unknown_outcome.verify is None:
            raise OrphanedWrite(seconds_ago=ago)
        call.unsettled = OrphanedWrite(seconds_ago=ago)  # verify looks it up first
    if verdict is IS_RUNNING:
        raise WriteInFlight()
    return DO_RUN, None


def unreadable(call: Call, exc: BackendError) -> Do:
    """The journal's store failed before it could tell whether `call`'s write already
    ran: raised, or run (``PASS``: marked for verify, or unjournaled)."""
    resolved = call.resolved
    if resolved.idempotent or resolved.rerun:  # sent again with its key, or safe to repeat
        fail(call, exc, "journal")  # "closed": not run; "open": run unjournaled
        return Do.PASS
    log.warning("journal: the entry of %s could not be read; its outcome is unknown", call.name)
    policy = resolved.policy
    if policy.unknown_outcome.verify is None or policy.shared.on_error == "closed":
        raise JournalUnreadable() from exc
    call.unsettled = JournalUnreadable()  # verify looks it up first
    return Do.PASS
