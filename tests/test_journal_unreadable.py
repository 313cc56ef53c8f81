"""A write whose journal cannot be read is never run as if it were new.

A step resumed after a crash looks just like a first run; only the journal tells them
apart. When its store fails (a broken disk, a dropped connection, a lock held past the
deadline) before it could tell, the write may already have taken effect, so a write that
must not run twice is answered ``unknown_outcome`` (or looked up with ``verify``, or put
to a person), whatever ``Shared(on_error=...)`` says. A keyed write, which the service
carries out once whatever happens, follows ``on_error``. Through every adapter, sync and
async, on a real ``SqliteSaver`` whose journal table fails.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from langchain_resilient_tools import Shared, ToolPolicy, UnknownOutcome
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL
from langchain_resilient_tools.state.sqlite import SqliteBackend
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.answers import envelope as _envelope
from tests.test_journal import Outbox, Pending, send_tool


class _Broken:
    """Makes every journal statement on a SQLite file fail, as a broken disk or a lost
    connection does (a lock held past the deadline: tests/test_journal_locks.py)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen = 0
        real = SqliteBackend._run

        def run(backend: SqliteBackend, sql: str, params: tuple[Any, ...] = ()) -> Any:
            if params[:1] == (NS_JOURNAL,):
                self.seen += 1
                raise sqlite3.OperationalError("disk I/O error")
            return real(backend, sql, params)

        monkeypatch.setattr(SqliteBackend, "_run", run)


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_a_write_whose_journal_fails_is_not_run_and_its_outcome_is_unknown(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch, on_error: str
) -> None:
    box = Outbox()
    policy = ToolPolicy(shared=Shared(on_error=on_error))  # type: ignore[arg-type]
    pending = Pending(harness, [send_tool(box)], saver(db), policy=policy)
    broken = _Broken(monkeypatch)
    body = _envelope(pending.resume())
    assert box.sent == [] and broken.seen >= 1
    assert body["error"] == "unknown_outcome" and body["retryable"] is False
    assert "journal" in body["message"] and "may or may not have taken effect" in body["message"]
    assert "disk I/O" not in json.dumps(body)  # the store's own error stays in the log


def test_verify_settles_a_write_whose_journal_fails(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the lookup: its result, nothing runs; not found: it runs once."""
    box = Outbox()
    policy = ToolPolicy(unknown_outcome=UnknownOutcome(verify=box.lookup))
    pending = Pending(harness, [send_tool(box)], saver(db), policy=policy)
    _Broken(monkeypatch)
    box.sent.append(pending.idempotency_key())  # it had been sent before the restart
    found = pending.resume()
    assert found.status == "success" and "sent (found by lookup)" in str(found.content)
    assert "journal could not be read" in str(found.content)
    assert found.response_metadata["resilience"]["served_by"] == "verify"
    assert len(box.sent) == 1
    # Not found, in a new process (this one's dedup keeps the found write as the call's
    # answer, and would answer its re-run with it, as it does a write that ran here):
    box.sent.clear()
    pending.crash()
    ran = pending.resume(rebuilt=True)
    assert ran.status == "success" and str(ran.content).endswith("sent to ann")
    assert box.sent == [pending.idempotency_key()]  # once, with the same key


def test_verify_does_not_run_a_write_when_the_policy_fails_closed(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Outbox()
    verify = UnknownOutcome(verify=box.lookup)
    policy = ToolPolicy(unknown_outcome=verify, shared=Shared(on_error="closed"))
    pending = Pending(harness, [send_tool(box)], saver(db), policy=policy)
    _Broken(monkeypatch)
    body = _envelope(pending.resume())
    assert box.sent == [] and body["error"] == "unknown_outcome"


@pytest.mark.parametrize(("on_error", "sent"), [("open", 1), ("closed", 0)])
def test_a_keyed_write_whose_journal_fails_follows_on_error(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch,
    on_error: str, sent: int,
) -> None:  # fmt: skip
    """The service carries a keyed write out once: under ``"open"`` it is sent (with the
    same key a resume would send), under ``"closed"`` refused as the store's failure."""
    box = Outbox()
    policy = ToolPolicy(idempotency_key=True, shared=Shared(on_error=on_error))  # type: ignore[arg-type]
    pending = Pending(harness, [send_tool(box)], saver(db), policy=policy)
    _Broken(monkeypatch)
    answer = pending.resume()
    assert len(box.sent) == sent
    if sent:
        assert answer.content == "sent to ann" and box.sent == [pending.idempotency_key()]
    else:
        assert _envelope(answer)["error"] == "transient_failure"


def test_a_person_is_asked_about_a_write_whose_journal_fails(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if harness.adapter == "tool":
        pytest.skip('a wrapped tool refuses unknown_outcome="interrupt" (it has no step)')
    box = Outbox()
    policy = ToolPolicy(unknown_outcome=UnknownOutcome(action="interrupt"))
    pending = Pending(harness, [send_tool(box)], saver(db), policy=policy)
    _Broken(monkeypatch)
    out = harness.invoke(pending.graph, None, {"configurable": {"thread_id": pending.thread}})
    questions = list(out.get("__interrupt__", ()))
    assert box.sent == [] and len(questions) == 1
    assert questions[0].value["tool_call_id"] == pending.call_id
    assert "journal" in json.dumps(questions[0].value)
    # The person chooses to run it again: it runs once (the store still failing, as
    # a rerun the LangGraph task keeps from running a third time), with the same key.
    resume = Command(resume={questions[0].id: {"choice": "run_again"}})
    out = harness.invoke(pending.graph, resume, {"configurable": {"thread_id": pending.thread}})
    assert box.sent == [pending.idempotency_key()]
    assert not out.get("__interrupt__")


def test_a_first_run_whose_journal_fails_is_not_run_either(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing tells a first run from a resume when the journal cannot be read."""
    box = Outbox()
    _Broken(monkeypatch)
    ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c9")])
    graph = harness.build([send_tool(box)], checkpointer=saver(db), ai=ai)
    payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
    state = harness.invoke(graph, payload, {"configurable": {"thread_id": "first"}})
    answer = [m for m in state["messages"] if getattr(m, "tool_call_id", None) == "c9"][-1]
    assert box.sent == [] and _envelope(answer)["error"] == "unknown_outcome"
