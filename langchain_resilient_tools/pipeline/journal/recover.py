"""What became of a call that a stopped run left unanswered, told from the journal.

A run that stops between a model's tool calls and their answers (cancelled, interrupted
and never resumed, its worker killed) leaves calls that no ToolMessage answers, and a new
run of the thread (a new user message) does not run them: LangGraph drops the stopped
run's pending tasks. `settle` says what became of such a call and runs nothing. It reads
the entry the journal stage would have kept for it, under the same key (tool, idempotency
key, step), at each step of its thread where it may have run (`steps`, from the adapter,
which reads them off the thread's checkpoints):

- a **receipt**: the answer the call got then (served by the journal, marked as such);
  a recorded failure is `Recorded`. A receipt that says the outcome was unknown gives way
  to the receipt of the run a person chose (``rerun``), if there is one;
- an **intent**: `OrphanedWrite` (its worker is gone, or is this process, which no longer
  runs it: its run was cut short here) or `WriteInFlight` (a live worker holds its lease);
- **nothing**, where the journal keeps an entry of every run of it (a write, journal on,
  the steps known, and entries not yet expired since the call was made): `NotRun`;
- nothing, and nothing that could tell: `LeftUnanswered` for a write (it may have taken
  effect), `NotRun(reads=True)` for a read (running it again is safe either way);
- no step where it could have run (`steps` empty: a call the model could not format
  never reaches a tool): `NotRun`.

A journal store that fails is `JournalUnreadable` for a write. Never "cancelled" blindly,
never "still running" for a worker that is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core.call import Call
from ...core.errors import (
    BackendError,
    JournalUnreadable,
    LeftUnanswered,
    NotRun,
    OrphanedWrite,
    Recorded,
    WriteInFlight,
)
from ...core.idempotency import key_for_call
from ...runtime.owner import me
from ...state.backend import StateBackend
from ...text import messages as m
from . import logic
from .logic import NS_JOURNAL, Verdict

RECOVERED_BY = "recovery"
"""``served_by`` of the answer to a call that no journal entry answered."""


Here = Callable[[str, Any], bool]
"""Whether this process still runs the write of a journal key (its entry given)."""


def _found(
    backend: StateBackend, call: Call, step: str, args: str, here: Here
) -> tuple[Verdict, Any]:
    """The call's entry at `step` and what it means (a rerun's entry where the first run's
    outcome was unknown and a person chose to run it once more)."""
    key = logic.entry_key(call.name, key_for_call(call, call.id, step), step)
    found = backend.get(NS_JOURNAL, key)
    verdict = logic.judge(found, backend.clock(), args)
    failure = found.get("failure") if verdict is Verdict.RECEIPT and found else None
    if isinstance(failure, Mapping) and failure.get("error") == "unknown_outcome":
        rerun = logic.entry_key(call.name, key_for_call(call, call.id, step), step, rerun=True)
        again = backend.get(NS_JOURNAL, rerun)
        again_verdict = logic.judge(again, backend.clock(), args)
        if again_verdict is not Verdict.NEW:
            key, found, verdict = rerun, again, again_verdict
    mine = verdict is Verdict.RUNNING and found and found.get("owner") == me()
    if mine and not here(key, found):
        return Verdict.ORPHANED, found  # its run was cut short in this very process
    return verdict, found


def _answer(call: Call, verdict: Verdict, found: Any, now: float) -> Any:
    call.record.served_by = "journal"
    if verdict is Verdict.RECEIPT:
        if found.get("outcome") == "error":
            raise Recorded(found.get("failure") or {})
        call.record.notices.append(m.JOURNAL_REPLAY)
        return found.get("content") or ""
    if verdict is Verdict.RUNNING:
        raise WriteInFlight()
    raise OrphanedWrite(seconds_ago=max(0.0, now - float(found.get("started") or 0.0)))


def settle(
    call: Call,
    backend: StateBackend | None,
    steps: Sequence[str] | None,
    since: float | None,
    here: Here,
) -> Any:
    """The answer to `call`, left unanswered by a stopped run: its result, or raised (see
    the module's docstring). `backend`: the call's journal (`None`: none); `steps`: the
    steps of its thread where it may have run (`None`: not known); `since`: when it was
    made (wall time, `None`: not known); `here`: whether this process still runs a key's
    write (an intent of this process that it no longer runs is orphaned)."""
    call.record.served_by = RECOVERED_BY
    resolved = call.resolved
    if steps is not None and not steps:  # it could have run nowhere (a malformed call)
        raise NotRun(reads=not resolved.write)
    # A tool not known here (classified by its name only): its call is looked up either way.
    lookup = resolved.write or call.tool is None
    if backend is None or steps is None or not lookup:
        raise NotRun(reads=True) if not resolved.write else LeftUnanswered()
    args = logic.args_digest(call.args)
    try:
        for step in steps:
            verdict, found = _found(backend, call, step, args, here)
            if verdict is not Verdict.NEW:
                return _answer(call, verdict, found, backend.clock())
    except BackendError as exc:
        raise (JournalUnreadable() if resolved.write else NotRun(reads=True)) from exc
    if not resolved.write:
        raise NotRun(reads=True)
    fresh = since is not None and backend.clock() - since < resolved.policy.journal.ttl_s
    if resolved.policy.journal.enabled and fresh:
        raise NotRun(reads=False)  # every run of it would have left an entry
    raise LeftUnanswered()
