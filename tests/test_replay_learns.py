"""A write answered from its journal receipt on a resume is known to dedup afterwards.

The worker that ran the write died after it took effect and before the step's checkpoint;
the resumed step answers the call from the receipt (nothing runs). When the model then
sends the same write again, in a later step of the thread, that is a repeat of a write
that took effect: dedup must block it (or answer it), exactly as it does when the first
call ran in this process. Before, the resume left dedup nothing to go on (the journal
answers before dedup is entered), and the re-send ran the write a second time.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_resilient_tools import ToolPolicy, UnknownOutcome
from langchain_resilient_tools.pipeline.journal import logic
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL
from langchain_resilient_tools.state.sqlite import SqliteBackend
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.answers import by_id, envelope
from tests.test_dangling import CONFIG, TWO_CALLS, Crash, hand_built
from tests.test_dangling import Outbox as DanglingOutbox
from tests.test_journal import Outbox, Pending, _intent, send_tool

RESENT = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c2")])


class Resent(Pending):
    """The pending step of `Pending`, in a thread whose model sends the write again next."""

    def build(self) -> Any:
        script = [self.ai, RESENT, AIMessage("done")]
        return self.harness.build(
            self.tools, policy=self.policy, checkpointer=self.saver, ai=self.ai, script=script,
            store=self.store, interrupt_before=["tools"],
        )  # fmt: skip

    def resend(self) -> ToolMessage:
        """The model's next turn sends the same write (call ``c2``); run its tools' step."""
        config = {"configurable": {"thread_id": self.thread}}
        if self.harness.adapter != "middleware":  # the node's graph has no model
            self.harness.invoke(self.graph, {"messages": [RESENT]}, config)
        state = self.harness.invoke(self.graph, None, config)
        answers = by_id(state["messages"])
        assert "c2" in answers, "the re-sent call was not answered"
        return answers["c2"]


def _with_receipt(pending: Resent, db: str) -> Resent:
    """`pending`, whose write a dead worker carried out: its receipt is in the journal."""
    done = logic.receipt(_intent(pending), now=2.0, value="sent to ann")
    SqliteBackend(db).put(NS_JOURNAL, pending.key(), done, ttl=600)
    return pending


def test_a_write_answered_from_its_receipt_is_not_run_again_when_resent(
    harness: Harness, db: str, saver: Any
) -> None:
    box = Outbox()
    pending = _with_receipt(Resent(harness, [send_tool(box)], saver(db)), db)
    first = pending.resume()
    assert first.response_metadata["resilience"]["served_by"] == "journal"
    again = pending.resend()
    assert box.sent == []  # the write took effect once, before the crash; never again
    if again.status == "error":
        assert envelope(again)["error"] == "duplicate_call"
    else:
        assert again.response_metadata["resilience"]["served_by"] == "dedup"


def test_the_thread_keeps_the_replayed_write_for_a_fresh_process(
    harness: Harness, db: str, saver: Any
) -> None:
    """A new process (new adapters, same checkpointer) reads the write from the thread's
    ledger: the entry the resume left there, not this process's memory. (A wrapped tool
    in a plain ToolNode writes no graph state: across processes its ledger is a store's.)"""
    if harness.adapter == "tool":
        pytest.skip("ResilientTool keeps its ledger in its process or a store, not the thread")
    box = Outbox()
    pending = _with_receipt(Resent(harness, [send_tool(box)], saver(db)), db)
    pending.resume()
    pending.graph = pending.build()  # a fresh process: its ledgers are empty
    pending.resend()
    assert box.sent == []


def test_a_resent_orphaned_write_goes_out_under_its_first_key(
    harness: Harness, db: str, saver: Any
) -> None:
    """The worker died mid-write: the resume answers ``unknown_outcome`` and advises a
    check, then a re-send. The model's re-send runs (it was told), with the key of the
    call it sends again, so a service that honours keys carries the write out once."""
    box = Outbox()
    pending = Resent(harness, [send_tool(box)], saver(db))
    SqliteBackend(db).put(NS_JOURNAL, pending.key(), _intent(pending), ttl=600)
    first = pending.resume()
    assert envelope(first)["error"] == "unknown_outcome"
    again = pending.resend()
    assert again.status == "success" and box.sent == [pending.idempotency_key()]


def test_an_orphaned_write_a_lookup_finds_is_not_run_again_when_resent(
    harness: Harness, db: str, saver: Any
) -> None:
    """The worker died mid-write and the write did take effect: the resume's lookup finds
    it (answered as verified, nothing runs), so the model's re-send is a repeat of a
    write that ran, blocked as one."""
    box = Outbox()
    box.sent.append("")  # the dead worker's send, under the call's key (set below)
    policy = ToolPolicy(unknown_outcome=UnknownOutcome(verify=box.lookup))
    pending = Resent(harness, [send_tool(box)], saver(db), policy=policy)
    box.sent[0] = pending.idempotency_key()
    SqliteBackend(db).put(NS_JOURNAL, pending.key(), _intent(pending), ttl=600)
    first = pending.resume()
    assert (
        first.status == "success" and first.response_metadata["resilience"]["served_by"] == "verify"
    )
    again = pending.resend()
    assert box.sent == [pending.idempotency_key()]  # once, by the worker that died
    assert envelope(again)["error"] == "duplicate_call"


AGAIN = AIMessage("", tool_calls=[tool_call("send_email", {"to": "alice@example.com"}, id="c9")])
"""The model sends the write of `TWO_CALLS` again (call ``c9``)."""


def _crashed_after_the_write(saver: Any) -> DanglingOutbox:
    """A run whose worker died after the write of `TWO_CALLS` took effect, before the
    step's answers were saved: the thread's calls dangle, the journal has the receipt."""
    outbox = DanglingOutbox()
    graph, _ = hand_built(outbox.tools(), saver, [TWO_CALLS], dies=True)
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    assert outbox.sent == ["alice@example.com"]
    return outbox


def _resent_answer(state: Any) -> ToolMessage:
    return by_id(state["messages"])["c9"]


def test_a_dangling_write_answered_from_its_receipt_is_not_run_again_when_resent(
    sqlite_saver: Any,
) -> None:
    """The same for a write that a stopped run left unanswered, answered from its
    receipt by the dangling-call repair at the start of the next run (a new process):
    the model sending it again in that run is blocked."""
    outbox = _crashed_after_the_write(sqlite_saver)
    graph, _ = hand_built(outbox.tools(), sqlite_saver, [AGAIN, AIMessage("Sent.")])
    state = graph.invoke({"messages": [HumanMessage("did it go?")]}, CONFIG)
    assert outbox.sent == ["alice@example.com"]  # once, before the crash
    assert envelope(_resent_answer(state))["error"] == "duplicate_call"


def test_the_thread_keeps_a_dangling_write_answered_from_its_receipt(sqlite_saver: Any) -> None:
    """The repair writes what dedup keeps of the receipt's answer into the thread's
    ``tool_ledger``: the model sending the write again in a later run, in yet another
    process (fresh adapters, nothing in memory), is blocked too."""
    outbox = _crashed_after_the_write(sqlite_saver)
    graph, _ = hand_built(outbox.tools(), sqlite_saver, [AIMessage("Sent.")])
    state = graph.invoke({"messages": [HumanMessage("did it go?")]}, CONFIG)
    assert state["tool_ledger"]["dedup"], "the repair left the thread nothing"
    graph, _ = hand_built(outbox.tools(), sqlite_saver, [AGAIN, AIMessage("Not again.")])
    state = graph.invoke({"messages": [HumanMessage("send it once more")]}, CONFIG)
    assert outbox.sent == ["alice@example.com"]  # once, before the crash
    assert envelope(_resent_answer(state))["error"] == "duplicate_call"
