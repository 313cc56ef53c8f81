"""Dedup's core (`pipeline.dedup.core`): its decisions, pinned without a graph or a store.

A `Visit` is driven here by hand, as the stage's drivers drive it: what it asks for
next (`Do`) for each thing a ledger or the call's twins may say, what it answers, and
what it has the ledger record when the call ran. `LocalLedger` is the in-memory ledger.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphInterrupt
from langgraph.types import Command

from langchain_resilient_tools import ToolPolicy
from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.core.errors import (
    AttemptTimeout,
    DuplicateCall,
    OutcomeStillUnknown,
    ToolRaised,
)
from langchain_resilient_tools.pipeline.dedup.core import Do, End, Ruling, Visit
from langchain_resilient_tools.pipeline.dedup.local import LocalLedger
from langchain_resilient_tools.pipeline.dedup.logic import Action, Entry, age_of, decide
from langchain_resilient_tools.pipeline.dedup.shared import SharedLedger
from langchain_resilient_tools.pipeline.dedup.twins import Group, Share
from langchain_resilient_tools.state.backend import MemoryBackend
from tests.support import calls


def make_call(*, read: bool = True, dedup: Any = None, call_id: str = "c2", **fields: Any) -> Call:
    name = "search_web" if read else "book_flight"
    policy = ToolPolicy(idempotent=read, **({"dedup": dedup} if dedup else {}))
    fields.setdefault("thread_id", "t1")
    return calls.make_call(name, {"q": "x"}, policy, id=call_id, **fields)


def visit_of(**kw: Any) -> Visit:
    visit = Visit.of(make_call(**kw))
    assert visit is not None
    return visit


# -- which calls dedup looks at ----------------------------------------------------------

_STATE = {"tool_ledger": {}, "messages": [AIMessage("", id="ai1")]}


@pytest.mark.parametrize(
    ("fields", "decides"),
    [
        ({}, True),  # a thread: its ledger
        ({"dedup": "off"}, False),
        ({"thread_id": None, "twinless": True}, False),  # nothing identical in its step
        ({"thread_id": None, "twinless": True, "state": {"tool_ledger": {}}}, False),  # no scope
        ({"thread_id": None, "twinless": True, "state": _STATE}, True),  # its message's
        ({"thread_id": None}, False),  # no thread, no step, no message: no scope
        ({"thread_id": None, "step": "s1"}, True),
    ],
)
def test_which_calls_are_decided(fields: dict[str, Any], decides: bool) -> None:
    assert (Visit.of(make_call(**fields)) is not None) is decides


def test_a_visit_knows_its_facts_once() -> None:
    visit = visit_of(read=False)
    assert (visit.mode, visit.scope) == ("block", "thread:t1")
    assert visit_of(dedup="warn").mode == "warn"
    assert visit_of(step="s1").grouped and not visit_of(step="s1", dedup="warn").grouped
    assert not visit_of(step="s1", twinless=True).grouped


# -- the decisions table: what the ledger said -> what the driver does ----------------------


@pytest.mark.parametrize(
    ("read", "action", "status", "do"),
    [
        (True, Action.RUN, "pending", Do.RUN),
        (False, Action.RUN, "pending", Do.RUN),
        (True, Action.WARN, "pending", Do.RUN),
        (True, Action.REUSE, "ok", Do.ANSWER),
        (False, Action.BLOCK, "ok", Do.ANSWER),
        (True, Action.REPLAY, "ok", Do.ANSWER),
        (False, Action.REPLAY, "unknown_outcome", Do.ANSWER),
        (True, Action.WAIT, "pending", Do.PASS),  # still running after the wait: runs too
        (False, Action.WAIT, "pending", Do.ANSWER),  # a write: never twice
    ],
)
def test_what_the_ledger_said_decides_the_next_step(
    read: bool, action: Action, status: Any, do: Do
) -> None:
    visit = visit_of(read=read)
    assert visit.told(Ruling(action, Entry(status, content="earlier"))) is do


def test_a_call_waits_once_for_an_identical_one_then_asks_again() -> None:
    import concurrent.futures

    visit = visit_of()
    entry = Entry("pending")
    waiter: concurrent.futures.Future[None] = concurrent.futures.Future()
    assert visit.told(Ruling(Action.WAIT, entry, waiter)) is Do.WAIT_ENTRY
    assert visit.waiter is waiter
    # The driver waits, then asks again: a second wait is not offered.
    assert visit.told(Ruling(Action.WAIT, entry, waiter)) is Do.PASS
    write = visit_of(read=False)
    assert write.told(Ruling(Action.WAIT, entry, waiter)) is Do.WAIT_ENTRY
    assert write.told(Ruling(Action.WAIT, entry, waiter)) is Do.ANSWER
    with pytest.raises(OutcomeStillUnknown):
        write.answer()


def test_the_answers() -> None:
    reuse = visit_of()
    entry = Entry("ok", content="earlier", repeats=1)
    reuse.told(Ruling(Action.REUSE, entry))
    assert reuse.answer() == "earlier"
    assert reuse.call.record.served_by == "dedup"
    assert "1 time(s) before" in reuse.call.record.notices[0]
    assert reuse.call.record.notices[0].endswith("this is the earlier result.")  # age unknown
    aged = visit_of()
    aged.told(Ruling(Action.REUSE, entry, age=130.0))
    assert aged.answer() == "earlier"
    assert aged.call.record.notices[0].endswith("this is the earlier result, from 2 min ago.")

    replay = visit_of()
    replay.told(Ruling(Action.REPLAY, entry))
    assert replay.answer() == "earlier"
    assert replay.call.record.notices == []  # its own result: unmarked

    unknown = visit_of(read=False)
    unknown.told(Ruling(Action.REPLAY, Entry("unknown_outcome")))
    with pytest.raises(OutcomeStillUnknown):
        unknown.answer()


@pytest.mark.parametrize(
    ("status", "reason"),
    [("ok", "done"), ("pending", "in_flight"), ("unknown_outcome", "unknown_outcome")],
)
def test_a_blocked_call_says_why(status: Any, reason: str) -> None:
    visit = visit_of(read=False)
    content = "booked password=hunter2" if status == "ok" else None
    visit.told(Ruling(Action.BLOCK, Entry(status, content=content, repeats=3)))
    with pytest.raises(DuplicateCall) as raised:
        visit.answer()
    assert (raised.value.reason, raised.value.repeats, raised.value.looping) == (reason, 3, True)
    assert (raised.value.previous is None) is (content is None)
    assert "hunter2" not in str(raised.value.previous)


def test_warn_runs_with_a_notice_shown_before_the_run() -> None:
    visit = visit_of(dedup="warn")
    assert visit.told(Ruling(Action.WARN, Entry("pending", repeats=1))) is Do.RUN
    assert visit.call.record.notices == [
        "You asked search_web exactly this before (1 time(s)); this is a fresh result."
    ]
    assert visit.shown == 1


# -- twins -------------------------------------------------------------------------------


def test_a_leader_asks_and_a_follower_waits_for_it() -> None:
    group = Group("c1")
    leader = visit_of(step="s1", call_id="c1")
    assert leader.start((group, True)) is Do.ASK and leader.leading is group
    follower = visit_of(step="s1", twin_of="c1")
    assert follower.start((group, False)) is Do.WAIT_TWIN and follower.twin is group
    group.settle(Share(value="shared"))
    assert follower.twin_settled() is Do.ANSWER
    assert follower.answer() == "shared"


def test_a_follower_the_ledger_answers() -> None:
    group = Group("c1")
    group.settle(None)  # the leader's result is kept: the ledger answers its twins
    follower = visit_of(step="s1", twin_of="c1")
    assert follower.start((group, False)) is Do.ASK
    assert follower.following is None and follower.leading is None


# -- how a run ended: what the ledger records, what the twins take ------------------------


def _ran(value: Any, served_by: str = "tool") -> tuple[End, Share | None]:
    visit = visit_of()
    visit.told(Ruling(Action.RUN, Entry("pending")))
    visit.call.record.served_by = served_by
    return visit.ran(value), visit.share


def test_what_a_run_leaves() -> None:
    assert _ran("fresh") == (End("ok", "fresh"), None)
    message = ToolMessage("fresh", tool_call_id="c2")
    assert _ran(message) == (End("ok", "fresh"), None)
    assert _ran(Command(update={})) == (End("done"), None)
    error = ToolMessage("nope", tool_call_id="c2", status="error")
    end, share = _ran(error)
    assert end == End("failed", keep=False) and share is not None and share.value is error
    end, share = _ran("stale", served_by="stale_cache")  # nothing fresh to reuse
    assert end == End("failed", keep=False)
    assert share is not None and share.served_by == "stale_cache"
    assert _ran([message], served_by="fallback")[1] is None  # messages answer their own id


def test_what_a_failure_leaves() -> None:
    read = visit_of()
    read.told(Ruling(Action.RUN, Entry("pending")))
    exc = ToolRaised(ValueError("bad"))
    assert read.failed(exc) == End("failed", keep=False)
    assert read.share is not None and read.share.exc is exc

    write = visit_of(read=False)
    write.told(Ruling(Action.RUN, Entry("pending")))
    assert write.failed(AttemptTimeout(5.0)) == End("unknown_outcome")  # kept: blocks repeats
    assert write.share is None  # its twins are blocked by the ledger, never asked twice

    interrupted = visit_of()
    interrupted.told(Ruling(Action.RUN, Entry("pending")))
    assert interrupted.failed(GraphInterrupt()) == End("failed", keep=False)
    assert interrupted.share is None  # control flow: each twin goes its own way


def test_a_call_cut_short() -> None:
    assert visit_of().cut() == End("failed", keep=False)
    assert visit_of(read=False).cut() == End("unknown_outcome", keep=False, told=False)


# -- the in-memory ledger with the core ------------------------------------------------------


def test_the_local_ledger_decides_runs_and_answers() -> None:
    ledger = LocalLedger(clock=lambda: 100.0)
    first = visit_of(call_id="c1")
    ruling = ledger.begin(first)
    assert first.told(ruling) is Do.RUN and ruling.entry is not None
    second = visit_of(call_id="c2")
    waiting = ledger.begin(second)
    assert second.told(waiting) is Do.WAIT_ENTRY  # the first still runs
    ledger.end(first, first.ran("fresh"))
    assert second.waiter.done()
    assert second.told(ledger.begin(second)) is Do.ANSWER
    assert second.answer() == "fresh" and second.call.record.served_by == "dedup"
    assert ledger.ledgers["search_web"].get(("thread:t1", second.key)) is ruling.entry


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_ledger_says_how_old_the_result_it_reuses_is(shared: bool) -> None:
    """Both ledgers give a reuse the age of the entry by their own clock (the shared
    one: the store's, which every worker reads alike); an entry kept in graph state
    by an older version (no time) has none."""
    now = [1_000.0]
    local = LocalLedger(clock=lambda: now[0])
    ledger: Any = SharedLedger(local, MemoryBackend(clock=lambda: now[0])) if shared else local
    first = visit_of(call_id="c1")
    first.told(ledger.begin(first))
    ledger.end(first, first.ran("fresh"))
    now[0] += 45.0
    second = visit_of(call_id="c2")
    ruling = ledger.begin(second)
    assert ruling.action is Action.REUSE and ruling.age == 45.0
    assert age_of(Entry("ok", at=0.0), now[0]) is None
    assert age_of(Entry("ok", at=now[0] + 5), now[0]) == 0.0  # a clock behind: not negative


def test_a_pending_write_of_this_very_call_elsewhere_is_blocked_not_waited_for() -> None:
    mine = Entry("pending", call_id="c1")
    assert decide("block", False, mine, "c1") is Action.WAIT
    assert decide("block", False, mine, "c1", here=False) is Action.BLOCK
    assert decide("reuse", True, mine, "c1", here=False) is Action.WAIT


def test_a_timed_out_write_whose_attempt_already_ended_is_settled_without_deadlock() -> None:
    """The attempt left running at the deadline may end before the ledger records the
    unknown outcome: watching it then calls back at once, under no lock of the ledger's
    (it hung the task benchmark)."""
    import concurrent.futures
    import threading

    ledger = LocalLedger(clock=lambda: 100.0)
    visit = visit_of(read=False, call_id="w1")
    ruling = ledger.begin(visit)
    assert visit.told(ruling) is Do.RUN
    ended: concurrent.futures.Future[str] = concurrent.futures.Future()
    ended.set_result("order W1 cancelled")
    worker = threading.Thread(
        target=ledger.end, args=(visit, End("unknown_outcome", late=ended)), daemon=True
    )
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "the ledger deadlocked on its own lock"
    entry = ruling.entry
    assert entry is not None and entry.status == "ok" and entry.landed
    assert entry.late is not None and entry.late.done()
