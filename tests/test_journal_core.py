"""The journal's core (`pipeline.journal.core`): what an entry found means, what a
write's end leaves, and what a failed store means, decided without a graph or a store."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.errors import GraphInterrupt

from langchain_resilient_tools import ToolPolicy, UnknownOutcome
from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.core.errors import (
    BackendError,
    Drained,
    JournalUnreadable,
    OrphanedWrite,
    Recorded,
    WriteInFlight,
)
from langchain_resilient_tools.core.key import canonical
from langchain_resilient_tools.pipeline.journal import logic
from langchain_resilient_tools.pipeline.journal.core import Do, End, decide, ending, unreadable
from langchain_resilient_tools.pipeline.journal.logic import Verdict
from langchain_resilient_tools.text import messages as m
from tests.support.calls import make_call


def _call(**policy: Any) -> Call:
    return make_call("send_email", {"to": "ann"}, ToolPolicy(**policy), thread_id="t")


def _intent(started: float = 10.0) -> dict[str, Any]:
    return logic.intent("send_email", {"to": "ann"}, owner={"pid": 1}, now=started, lease=30.0)


def test_a_receipt_answers_from_what_it_kept() -> None:
    call = _call()
    done = logic.receipt(_intent(), now=11.0, value="sent to ann")
    assert decide(call, Verdict.RECEIPT, done, 12.0) == (Do.ANSWER, "sent to ann")
    assert call.record.served_by == "journal" and call.record.notices == [m.JOURNAL_REPLAY]


def test_a_recorded_failure_is_raised_as_the_model_was_told_it() -> None:
    failed = {**logic.receipt(_intent(), now=11.0), "outcome": "error", "failure": {"error": "x"}}
    with pytest.raises(Recorded):
        decide(_call(), Verdict.RECEIPT, failed, 12.0)


def test_an_orphaned_plain_write_is_an_unknown_outcome_never_a_second_run() -> None:
    with pytest.raises(OrphanedWrite):
        decide(_call(), Verdict.ORPHANED, _intent(started=10.0), 40.0)


def test_an_orphaned_write_with_verify_runs_after_the_lookup() -> None:
    call = _call(unknown_outcome=UnknownOutcome(verify=lambda info: None))
    assert decide(call, Verdict.ORPHANED, _intent(), 40.0) == (Do.RUN, None)
    assert isinstance(call.unsettled, OrphanedWrite)


def test_an_orphaned_keyed_write_is_sent_again_with_its_key() -> None:
    call = _call(idempotency_key=True)
    assert decide(call, Verdict.ORPHANED, _intent(), 40.0) == (Do.RUN, None)
    assert call.record.notices == [m.JOURNAL_RESENT] and call.unsettled is None


def test_a_write_running_elsewhere_past_the_wait_is_in_flight() -> None:
    with pytest.raises(WriteInFlight):
        decide(_call(), Verdict.RUNNING, _intent(), 12.0)


def test_nothing_there_runs() -> None:
    assert decide(_call(), Verdict.NEW, None, 12.0) == (Do.RUN, None)


@pytest.mark.parametrize(
    ("exc", "end"),
    [
        (GraphInterrupt(), End.FORGET),
        (Drained("write"), End.FORGET),
        (ValueError("boom"), End.RECEIPT),
        (asyncio.CancelledError(), End.ABANDON),
        (KeyboardInterrupt(), End.ABANDON),
    ],
)
def test_what_a_write_that_raised_leaves(exc: BaseException, end: End) -> None:
    assert ending(exc) is end


def test_a_store_that_fails_before_it_could_tell_never_runs_a_plain_write_blindly() -> None:
    with pytest.raises(JournalUnreadable):
        unreadable(_call(), BackendError("down"))
    verified = _call(unknown_outcome=UnknownOutcome(verify=lambda info: None))
    assert unreadable(verified, BackendError("down")) is Do.PASS
    assert isinstance(verified.unsettled, JournalUnreadable)
    assert unreadable(_call(idempotency_key=True), BackendError("down")) is Do.PASS


_VALUES = st.one_of(
    st.text(), st.integers(), st.booleans(), st.none(), st.floats(),
    st.lists(st.text(), max_size=3), st.dictionaries(st.text(), st.integers(), max_size=3),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(st.text(), st.integers()), _VALUES, max_size=6))
def test_the_argument_digest_is_the_encoders_whatever_the_arguments(args: dict[Any, Any]) -> None:
    """`logic.args_digest` writes flat arguments itself: the same text, so the same digest,
    as the JSON encoder of their canonical form (an intent written before compares equal
    after an upgrade)."""
    text = logic._ARGS_JSON.encode(canonical(dict(args)))
    expected = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
    assert logic.args_digest(args) == expected
    assert logic.args_digest({"to": " ann\n", "n": 3, "ok": True, "cc": None}) == (
        logic.args_digest({"cc": None, "ok": True, "n": 3, "to": "ann"})
    )
