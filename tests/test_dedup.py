"""Dedup: decisions, the bounded ledger, keys, and repeated calls through every adapter."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import ToolException

from langchain_resilient_tools import Dedup, ResilientTool, ToolPolicy
from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.core.errors import UsageError
from langchain_resilient_tools.core.key import call_key
from langchain_resilient_tools.pipeline.dedup.logic import (
    Action,
    Entry,
    Ledger,
    decide,
    effective_mode,
)
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.answers import by_id, envelope
from tests.support.calls import make_call
from tests.support.graphs import tools_graph
from tests.tools import CALLS, counted, failing_tool, flaky_tool, ok_tool


def answered_once(state: dict[str, Any]) -> None:
    """Invariant 1: every tool call id of every AIMessage has exactly one answer."""
    answers = Counter(m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage))
    asked = [tc["id"] for m in state["messages"] if isinstance(m, AIMessage) for tc in m.tool_calls]
    assert sorted(asked) == sorted(answers), (asked, answers)
    assert set(answers.values()) <= {1}


def served_by(message: ToolMessage) -> str:
    """What answered: a message with no record is the tool's own, untouched answer."""
    record = message.response_metadata.get("resilience")
    return "tool" if record is None else str(record["served_by"])


def search_tool() -> Any:
    return counted("search_web", lambda query: f"results for {query}")


def book_tool() -> Any:
    return counted("book_flight", lambda city: f"booked a flight to {city}")


# -- pure decisions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "idempotent", "status", "expected"),
    [
        ("reuse", True, None, Action.RUN),
        ("reuse", True, "ok", Action.REUSE),
        ("reuse", True, "failed", Action.RUN),
        ("reuse", True, "pending", Action.WAIT),
        ("reuse", True, "done", Action.RUN),
        ("reuse", False, "done", Action.BLOCK),
        ("block", False, "ok", Action.BLOCK),
        ("block", False, "pending", Action.BLOCK),
        ("block", False, "unknown_outcome", Action.RESEND),
        ("block", False, "failed", Action.RUN),
        ("warn", True, "ok", Action.WARN),
        ("warn", False, "pending", Action.BLOCK),
        ("warn", False, "unknown_outcome", Action.RESEND),
        ("off", False, "unknown_outcome", Action.RUN),
        ("off", True, "ok", Action.RUN),
    ],
)
def test_decide(mode: Any, idempotent: bool, status: Any, expected: Action) -> None:
    entry = None if status is None else Entry(status)
    assert decide(mode, idempotent, entry) is expected


def test_effective_mode_defaults_by_idempotency() -> None:
    assert effective_mode(None, True) == "reuse"
    assert effective_mode(None, False) == "block"
    assert effective_mode("warn", False) == "warn"


def test_ledger_is_bounded_by_ttl_and_size() -> None:
    now = [1000.0]
    ledger = Ledger(ttl=10, max_entries=3, clock=lambda: now[0])
    for i in range(5):
        ledger.put(("t", str(i)), Entry("ok", content=i, at=now[0]))
    assert len(ledger) == 3
    assert ledger.get(("t", "0")) is None and ledger.get(("t", "4")) is not None
    now[0] += 11
    assert ledger.get(("t", "4")) is None
    assert not ledger.fresh(Entry("ok", at=1000.0))


def test_entry_round_trip() -> None:
    entry = Entry("ok", content="x", repeats=2, at=5.0, call_id="c1")
    data = entry.persisted("get_x")
    assert data == {
        "tool": "get_x", "status": "ok", "content": "x", "repeats": 2, "at": 5.0, "call_id": "c1"
    }  # fmt: skip
    back = Entry.restore(data)
    assert back is not None
    assert (back.status, back.content, back.repeats, back.call_id) == ("ok", "x", 2, "c1")
    assert Entry.restore({"status": "pending"}) is None


# -- keys -------------------------------------------------------------------------------


def _call(args: dict[str, Any], policy: ToolPolicy | None = None, name: str = "search") -> Call:
    return make_call(name, args, policy, id="id")


def test_key_is_canonical() -> None:
    a = _call({"q": "a  b ", "n": 1})
    b = _call({"n": 1, "q": " a b"})
    assert call_key(a) == call_key(b)
    assert call_key(a) != call_key(_call({"q": "a b", "n": 2}))
    assert call_key(a) != call_key(_call({"q": "a b", "n": 1}, name="other"))


def test_key_fields_and_key_function() -> None:
    fields = ToolPolicy(dedup=Dedup(key=["q"]))
    assert call_key(_call({"q": "x", "page": 1}, fields)) == call_key(
        _call({"q": "x", "page": 2}, fields)
    )
    lower = ToolPolicy(dedup=Dedup(key=lambda args: args["q"].lower()))
    assert call_key(_call({"q": "Paris"}, lower)) == call_key(_call({"q": "PARIS"}, lower))
    broken = ToolPolicy(dedup=Dedup(key=lambda args: args["missing"]))
    assert call_key(_call({"q": "x"}, broken)) == call_key(_call({"q": "x"}))


def test_bad_dedup_config_fails_at_construction() -> None:
    with pytest.raises(ValueError):
        ToolPolicy(dedup=Dedup(key=[1]))  # type: ignore[list-item]
    with pytest.raises(ValueError):
        ToolPolicy(dedup="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ToolPolicy(dedup=Dedup(ttl_s=0))
    assert issubclass(UsageError, ValueError)


# -- through every adapter, sync and async ----------------------------------------------


def test_identical_reads_in_one_message_run_once(harness: Harness) -> None:
    calls = [
        tool_call("search_web", {"query": "cheap flights"}, id="a"),
        tool_call("search_web", {"query": " cheap   flights"}, id="b"),
        tool_call("search_web", {"query": "hotels"}, id="c"),
    ]
    result = harness.run([search_tool()], calls)
    assert CALLS["search_web"] == 2
    served = sorted(served_by(result[i]) for i in "ab")
    assert served == ["dedup", "tool"]
    reused = next(result[i] for i in "ab" if "repeats an earlier" in str(result[i].content))
    assert reused.status == "success"
    assert "this is the earlier result." in str(reused.content)  # of this moment: no age
    original = next(result[i] for i in "ab" if result[i] is not reused)
    assert str(reused.content).endswith("\n" + str(original.content))  # the earlier result
    assert result["c"].content == "results for hotels"
    answered_once(result.state)


def test_identical_writes_in_one_message_are_blocked(harness: Harness) -> None:
    calls = [
        tool_call("book_flight", {"city": "Oslo"}, id="a"),
        tool_call("book_flight", {"city": "Oslo"}, id="b"),
    ]
    result = harness.run([book_tool()], calls)
    assert CALLS["book_flight"] == 1  # no double booking
    statuses = sorted(result[i].status for i in "ab")
    assert statuses == ["error", "success"]
    blocked = next(result[i] for i in "ab" if result[i].status == "error")
    data = envelope(blocked)
    assert data["error"] == "duplicate_call" and data["retryable"] is False
    assert "not run" in data["message"]
    if harness.adapter != "tool":
        assert [r["error"] for r in result.tool_errors] == ["duplicate_call"]
    answered_once(result.state)


def test_warn_mode_runs_and_tells(harness: Harness) -> None:
    calls = [tool_call("search_web", {"query": "q"}, id=i) for i in ("a", "b")]
    result = harness.run([search_tool()], calls, policy=ToolPolicy(dedup="warn"))
    assert CALLS["search_web"] == 2
    texts = sorted(str(result[i].content) for i in "ab")
    assert texts[0].startswith("[You asked search_web exactly this before")
    assert texts[1] == "results for q"
    answered_once(result.state)


def test_off_mode_runs_every_time(harness: Harness) -> None:
    calls = [tool_call("book_flight", {"city": "Rome"}, id=i) for i in ("a", "b")]
    result = harness.run([book_tool()], calls, policy=ToolPolicy(dedup="off"))
    assert CALLS["book_flight"] == 2
    assert all(result[i].content == "booked a flight to Rome" for i in "ab")
    answered_once(result.state)


def test_failures_are_not_reused_across_steps(harness: Harness) -> None:
    tool = failing_tool("get_city", ToolException("no such city"))
    turns = [[tool_call("get_city", {"query": "x"}, id=i)] for i in ("a", "b")]
    last = harness.run_turns([tool], turns)[-1]
    assert CALLS["get_city"] == 2  # the second step runs the call again
    assert {envelope(last[i])["error"] for i in "ab"} == {"tool_error"}
    answered_once(last.state)


def test_repeat_across_turns_and_restart(harness: Harness) -> None:
    turns = [
        [tool_call("search_web", {"query": "q"}, id="t1")],
        [tool_call("search_web", {"query": "q"}, id="t2")],
        [tool_call("search_web", {"query": "q"}, id="t3")],
    ]
    results = harness.run_turns([search_tool()], turns, restart_at=[2])
    last = results[-1]
    assert last["t1"].content == "results for q"
    assert "repeats an earlier identical call" in str(last["t2"].content)
    assert last["t2"].response_metadata["resilience"]["served_by"] == "dedup"
    if harness.adapter == "tool":
        # A wrapped tool in a plain ToolNode cannot read graph state: a new process
        # (new wrapper) starts with an empty in-memory ledger.
        assert CALLS["search_web"] == 2
    else:
        assert CALLS["search_web"] == 1  # the restarted graph reused the checkpointed entry
        assert "repeats an earlier identical call" in str(last["t3"].content)
        entries = last.state["tool_ledger"]["dedup"]
        assert [e["status"] for e in entries.values()] == ["ok"]
        # The entry points at the message that holds the result, by its call id.
        assert [(e["call_id"], "content" in e) for e in entries.values()] == [("t1", False)]
    answered_once(last.state)


def test_a_reused_result_says_how_old_it_is(harness: Harness) -> None:
    """A repeat answered with the earlier result says when that result was made, by the
    ledger's clock, so that the model can tell a status it polls may have changed since
    (an identical call in the same message as the one that ran says no age: see
    `test_identical_reads_in_one_message_run_once`)."""
    from langchain_resilient_tools.pipeline.dedup.stage import DedupStage

    now = [0.0]

    def at_minute(i: int) -> None:
        now[0] = 1_000.0 + 300.0 * i  # each turn five minutes after the one before
        for adapter in harness.adapters:
            for stage in adapter.pipeline.stages:
                if isinstance(stage, DedupStage):
                    stage.clock = lambda: now[0]

    turns = [
        [tool_call("search_web", {"query": "q"}, id="t1")],
        [tool_call("search_web", {"query": "q"}, id="t2"), tool_call("search_web", {"query": "q"}, id="t3")],
    ]  # fmt: skip
    last = harness.run_turns([search_tool()], turns, before_turn=at_minute)[-1]
    assert CALLS["search_web"] == 1
    assert "this is the earlier result, from 5 min ago." in str(last["t2"].content)
    assert str(last["t2"].content).endswith("\nresults for q")
    assert "this is the earlier result, from 5 min ago." in str(last["t3"].content)  # t1's too
    answered_once(last.state)


def test_a_blocked_repeat_says_when_the_earlier_call_ran(harness: Harness) -> None:
    """A repeat of a write that succeeded is blocked with ``duplicate_call``; its envelope
    says when the earlier call ran, by the ledger's clock (a repeat less than a second
    old says nothing: `test_block_mode_escalates_and_previews`)."""
    from langchain_resilient_tools.pipeline.dedup.stage import DedupStage

    now = [0.0]

    def at(i: int) -> None:
        now[0] = 1_000.0 + 480.0 * i  # each turn eight minutes after the one before
        for adapter in harness.adapters:
            for stage in adapter.pipeline.stages:
                if isinstance(stage, DedupStage):
                    stage.clock = lambda: now[0]

    turns = [[tool_call("book_flight", {"city": "Oslo"}, id=f"t{i}")] for i in (1, 2)]
    last = harness.run_turns([book_tool()], turns, before_turn=at)[-1]
    assert CALLS["book_flight"] == 1
    data = envelope(last["t2"])
    assert data["error"] == "duplicate_call"
    assert data["message"].endswith("not run again (the earlier call ran 8 min ago).")
    assert data["ran_s_ago"] == 480
    answered_once(last.state)


def test_write_repeat_blocked_after_restart(harness: Harness) -> None:
    if harness.adapter == "tool":
        pytest.skip("a wrapped tool keeps its ledger in memory only")
    turns = [
        [tool_call("book_flight", {"city": "Oslo"}, id="t1")],
        [tool_call("book_flight", {"city": "Oslo"}, id="t2")],
    ]
    results = harness.run_turns([book_tool()], turns, restart_at=[1])
    last = results[-1]
    assert CALLS["book_flight"] == 1
    data = envelope(last["t2"])
    assert data["error"] == "duplicate_call"
    assert data["previous_result"] == "booked a flight to Oslo"
    assert [r["tool_call_id"] for r in last.tool_errors] == ["t2"]
    answered_once(last.state)


def test_threads_do_not_share_a_ledger(harness: Harness) -> None:
    turns = [[tool_call("search_web", {"query": "q"}, id="t1")]]
    harness.run_turns([search_tool()], turns, thread_id="one")
    harness.run_turns([search_tool()], turns, thread_id="two")
    assert CALLS["search_web"] == 2


def test_escalates_when_looping(harness: Harness) -> None:
    calls = [tool_call("search_web", {"query": "q"}, id=str(i)) for i in range(4)]
    policy = ToolPolicy(dedup=Dedup(looping_after=2))
    result = harness.run([search_tool()], calls, policy=policy)
    assert CALLS["search_web"] == 1
    looping = [i for i in "0123" if "going in circles" in str(result[i].content)]
    assert len(looping) == 2  # the 2nd and 3rd repeat


# -- ResilientTool directly, within one conversation thread -------------------------------

THREAD = {"configurable": {"thread_id": "t-direct"}}


def test_a_write_sent_again_after_its_unknown_outcome_runs_once_more() -> None:
    """Safe is not stuck: the model told an outcome is unknown checks and sends the write
    again; that runs (once), and a repeat of it after it succeeded is blocked."""
    wrapped = ResilientTool.wrap(flaky_tool("send_email", failures=1))
    first = wrapped.invoke(tool_call("send_email", {"query": "hi"}, id="1"), THREAD)
    second = wrapped.invoke(tool_call("send_email", {"query": "hi"}, id="2"), THREAD)
    third = wrapped.invoke(tool_call("send_email", {"query": "hi"}, id="3"), THREAD)
    data = envelope(first)
    assert data["error"] == "unknown_outcome"
    assert "check whether it took effect" in data["suggestion"]
    assert "send this same call again" in data["suggestion"]
    assert second.status == "success" and second.content == "result for hi"
    assert envelope(third)["error"] == "duplicate_call"
    assert CALLS["send_email"] == 2


def test_decide_blocks_the_first_repeat_of_an_unknown_outcome_nobody_was_told() -> None:
    """A write cut short or orphaned (no answer told the model) blocks its first repeat,
    which tells it; the one after that is a deliberate re-send."""
    untold = Entry("unknown_outcome", call_id="a", told=False)
    assert decide("block", False, untold, "b") is Action.BLOCK
    assert decide("block", False, Entry("unknown_outcome", call_id="a"), "b") is Action.RESEND
    assert decide("block", False, Entry("unknown_outcome", call_id="a"), "a") is Action.REPLAY
    assert Entry.restore(untold.persisted("t")) == untold


def test_block_mode_escalates_and_previews() -> None:
    wrapped = ResilientTool.wrap(book_tool(), policy=ToolPolicy(dedup=Dedup(looping_after=2)))
    wrapped.invoke({"city": "Oslo"}, THREAD)
    first = json.loads(wrapped.invoke({"city": "Oslo"}, THREAD))
    second = json.loads(wrapped.invoke({"city": "Oslo"}, THREAD))
    assert first["error"] == "duplicate_call" and "looping" not in first
    assert "ran_s_ago" not in first and "earlier call ran" not in first["message"]  # just now
    assert first["previous_result"] == "booked a flight to Oslo"
    assert second["looping"] is True and "going in circles" in second["message"]
    assert second["repeats"] == 2
    assert CALLS["book_flight"] == 1


def test_reuse_ttl_expires() -> None:
    from langchain_resilient_tools.pipeline.dedup.stage import DedupStage

    now = [0.0]
    wrapped = ResilientTool.wrap(ok_tool(), policy=ToolPolicy(dedup=Dedup(ttl_s=60)))
    stage = next(s for s in wrapped.pipeline.stages if isinstance(s, DedupStage))
    stage.clock = lambda: now[0]
    wrapped.invoke({"city": "Paris"}, THREAD)
    assert "repeats" in wrapped.invoke({"city": "Paris"}, THREAD)
    now[0] = 61.0
    assert wrapped.invoke({"city": "Paris"}, THREAD) == "sunny in Paris"
    assert CALLS["get_weather"] == 2


def test_memory_is_bounded_by_max_entries() -> None:
    from langchain_resilient_tools.pipeline.dedup.stage import DedupStage

    wrapped = ResilientTool.wrap(ok_tool(), policy=ToolPolicy(dedup=Dedup(max_entries=50)))
    for i in range(200):
        wrapped.invoke({"city": f"c{i}"}, THREAD)
    stage = next(s for s in wrapped.pipeline.stages if isinstance(s, DedupStage))
    assert len(stage._ledgers["get_weather"]) == 50
    assert wrapped.invoke({"city": "c199"}, THREAD).startswith("[This repeats")
    assert wrapped.invoke({"city": "c0"}, THREAD) == "sunny in c0"  # forgotten: run again


async def second_waits_for_first(
    wrapped: ResilientTool,
    args: dict[str, Any],
    ids: tuple[str, str],
    started: asyncio.Event,
    gate: asyncio.Event,
) -> tuple[Any, Any]:
    """Call `wrapped` (a tool held at `gate`) twice with `args`, the second call once the
    first has `started`: the second must wait for the first, not run the tool again."""
    name = wrapped.name
    first = asyncio.ensure_future(wrapped.ainvoke(tool_call(name, args, id=ids[0]), THREAD))
    await started.wait()
    second = asyncio.ensure_future(wrapped.ainvoke(tool_call(name, args, id=ids[1]), THREAD))
    await asyncio.sleep(0)
    assert not second.done()  # waiting for the first, not running the tool again
    gate.set()
    one, two = await asyncio.gather(first, second)
    return one, two


async def test_async_parallel_reads_wait_for_the_first() -> None:
    started = asyncio.Event()
    gate = asyncio.Event()

    async def slow(query: str) -> str:
        started.set()
        await gate.wait()
        return f"late {query}"

    wrapped = ResilientTool.wrap(counted("search_slow", lambda query: "", coroutine=slow))
    one, two = await second_waits_for_first(wrapped, {"query": "q"}, ("1", "2"), started, gate)
    assert one.content == "late q"
    assert two.content.endswith("late q") and two.tool_call_id == "2"
    assert CALLS["search_slow"] == 1


def test_many_parallel_identical_calls_are_decided_once(harness: Harness) -> None:
    reads = [tool_call("search_web", {"query": "q"}, id=f"r{i}") for i in range(10)]
    writes = [tool_call("book_flight", {"city": "Oslo"}, id=f"w{i}") for i in range(10)]
    result = harness.run([search_tool(), book_tool()], reads + writes)
    assert CALLS["search_web"] == 1 and CALLS["book_flight"] == 1
    served = Counter(served_by(result[f"r{i}"]) for i in range(10))
    assert served == {"tool": 1, "dedup": 9}
    errors = Counter(
        envelope(result[f"w{i}"])["error"] for i in range(10) if result[f"w{i}"].status == "error"
    )
    assert errors == {"duplicate_call": 9}
    answered_once(result.state)


def test_first_twins() -> None:
    from langchain_resilient_tools.pipeline.dedup.logic import first_twins

    calls = [
        tool_call("a", {"q": "x"}, id="1"),
        tool_call("a", {"q": " x "}, id="2"),
        tool_call("b", {"q": "x"}, id="3"),
        tool_call("a", {"q": "x"}, id="4"),
        {"name": "a", "args": "not parsed", "id": "5"},
    ]
    assert first_twins(calls) == [None, 0, None, 0, None]
    # as in JSON, 1, 1.0 and true differ; nested arguments compare canonically too
    typed = [tool_call("a", {"n": v}, id=str(i)) for i, v in enumerate([1, 1.0, True, 1])]
    assert first_twins(typed) == [None, None, None, 0]
    nested = [
        tool_call("a", {"f": {"x": "a  b", "y": [1]}}, id="1"),
        tool_call("a", {"f": {"y": [1], "x": "a b"}}, id="2"),
        tool_call("a", {"f": {"y": [2], "x": "a b"}}, id="3"),
    ]
    assert first_twins(nested) == [None, 0, None]


_FLAT = st.dictionaries(
    st.sampled_from(["q", "query", "n", "x"]),
    st.one_of(
        st.text(alphabet=st.sampled_from("ab \t\n\u00a0\u2003\x1c\u3000"), max_size=6),
        st.integers(-2, 2),
        st.floats(-2, 2),
        st.booleans(),
        st.none(),
    ),
    max_size=3,
)


_SPACES = st.text(alphabet=st.sampled_from(" \t\n\u00a0\u2003\x1c\u3000"), min_size=1, max_size=3)


@st.composite
def _flat_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two flat argument dicts: unrelated, or the second the first with its strings'
    whitespace written another way (twins for `canonical`)."""
    a = draw(_FLAT)
    if draw(st.booleans()):
        return a, draw(_FLAT)
    b = {}
    for k, v in a.items():
        if isinstance(v, str):
            words = v.split()
            v = draw(_SPACES) * draw(st.booleans()) + "".join(
                w + (draw(_SPACES) if i < len(words) - 1 else "") for i, w in enumerate(words)
            )
        b[k] = v
    return a, b


@settings(max_examples=300, deadline=None)
@given(_flat_pairs())
def test_flat_calls_are_twins_exactly_when_canonical_says_so(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The twin key of flat arguments (built without JSON) agrees with `canonical`
    (whitespace of every kind folded; 1, 1.0 and true told apart, as JSON tells them)."""
    from langchain_resilient_tools.core.key import canonical
    from langchain_resilient_tools.pipeline.dedup.logic import first_twins

    def typed(args: dict[str, Any]) -> dict[str, tuple[type, Any]]:
        return {k: (type(v), v) for k, v in canonical(args).items()}

    a, b = pair
    twins = first_twins([tool_call("t", a, id="1"), tool_call("t", b, id="2")])
    assert (twins == [None, 0]) == (typed(a) == typed(b))


def test_the_first_of_identical_calls_is_the_one_that_runs(harness: Harness) -> None:
    if harness.mode == "sync" and harness.adapter == "tool":
        pytest.skip("ToolNode's own sync dispatch decides which identical call starts first")
    calls = [
        tool_call("search_web", {"query": "q"}, id="first"),
        tool_call("book_flight", {"city": "Oslo"}, id="book"),
        tool_call("search_web", {"query": "q"}, id="again"),
        tool_call("book_flight", {"city": "Oslo"}, id="rebook"),
    ]
    for _ in range(3):  # no luck involved
        CALLS.clear()
        result = harness.run([search_tool(), book_tool()], calls)
        assert result["first"].content == "results for q"
        assert str(result["again"].content).startswith("[This repeats an earlier")
        assert result["book"].content == "booked a flight to Oslo"
        data = envelope(result["rebook"])
        assert data["error"] == "duplicate_call"
        assert data["previous_result"] == "booked a flight to Oslo"  # it waited for the first
        assert CALLS == {"search_web": 1, "book_flight": 1}


# -- scope and re-runs -------------------------------------------------------------------


def test_without_a_thread_dedup_stays_within_one_message() -> None:
    """Without a thread id a graph may serve many users: no result crosses messages."""
    from langchain_core.messages import AIMessage

    from langchain_resilient_tools import ResilientToolNode

    graph = tools_graph(ResilientToolNode([book_tool()]))
    twice = [tool_call("book_flight", {"city": "Oslo"}, id=f"a{i}") for i in range(2)]
    out = graph.invoke({"messages": [AIMessage("", tool_calls=twice)]})
    assert CALLS["book_flight"] == 1  # the twin in the same message is blocked
    assert json.loads(out["messages"][-1].content)["error"] == "duplicate_call"
    other_user = [tool_call("book_flight", {"city": "Oslo"}, id="b0")]
    out = graph.invoke({"messages": [AIMessage("", tool_calls=other_user)]})
    assert out["messages"][-1].content == "booked a flight to Oslo"
    assert CALLS["book_flight"] == 2


def test_direct_calls_outside_a_graph_are_not_deduplicated() -> None:
    wrapped = ResilientTool.wrap(book_tool())
    assert wrapped.invoke({"city": "Oslo"}) == wrapped.invoke({"city": "Oslo"})
    assert CALLS["book_flight"] == 2


def test_the_same_call_id_again_is_answered_with_its_own_result() -> None:
    """A resume re-runs a step: its calls keep their answers and do not run again."""
    wrapped = ResilientTool.wrap(book_tool())
    first = wrapped.invoke(tool_call("book_flight", {"city": "Oslo"}, id="c1"), THREAD)
    again = wrapped.invoke(tool_call("book_flight", {"city": "Oslo"}, id="c1"), THREAD)
    assert first.content == again.content == "booked a flight to Oslo"
    assert again.status == "success"
    assert again.response_metadata["resilience"]["served_by"] == "dedup"
    assert CALLS["book_flight"] == 1
    other = wrapped.invoke(tool_call("book_flight", {"city": "Oslo"}, id="c2"), THREAD)
    assert envelope(other)["error"] == "duplicate_call"


def test_a_rerun_of_a_write_with_unknown_outcome_stays_unknown() -> None:
    wrapped = ResilientTool.wrap(flaky_tool("send_email", failures=1))
    first = wrapped.invoke(tool_call("send_email", {"query": "hi"}, id="c1"), THREAD)
    again = wrapped.invoke(tool_call("send_email", {"query": "hi"}, id="c1"), THREAD)
    assert envelope(first)["error"] == envelope(again)["error"] == "unknown_outcome"
    assert "ran for this call before" in envelope(again)["message"]
    assert CALLS["send_email"] == 1


async def test_the_same_call_id_while_it_still_runs_waits_for_its_answer() -> None:
    """A step re-run early (a resume while the first run's sibling is still going) waits
    for that very call to finish and answers with its result: a write runs once."""
    started = asyncio.Event()
    gate = asyncio.Event()

    async def slow(city: str) -> str:
        started.set()
        await gate.wait()
        return f"booked {city}"

    wrapped = ResilientTool.wrap(counted("book_room", lambda city: "", coroutine=slow))
    one, two = await second_waits_for_first(wrapped, {"city": "Oslo"}, ("c1", "c1"), started, gate)
    assert one.content == two.content == "booked Oslo"
    assert CALLS["book_room"] == 1


# -- the twin rule, however the node is reached ------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_identical_writes_blocked_when_the_node_is_invoked_directly(mode: str) -> None:
    """No graph, no thread, an AIMessage without an id (a notebook or a unit test):
    the twin of a write is blocked, as it is in a compiled graph."""
    from langgraph.runtime import Runtime

    from langchain_resilient_tools import ResilientToolNode

    node = ResilientToolNode([book_tool(), search_tool()])
    ai = AIMessage(
        "",
        tool_calls=[
            tool_call("book_flight", {"city": "Oslo"}, id="a"),
            tool_call("book_flight", {"city": "Oslo"}, id="b"),
            tool_call("search_web", {"query": "q"}, id="c"),
            tool_call("search_web", {"query": "q"}, id="d"),
        ],
    )
    config: Any = {"configurable": {"__pregel_runtime": Runtime()}}
    if mode == "sync":
        out = node.invoke({"messages": [ai]}, config)
    else:
        out = asyncio.run(node.ainvoke({"messages": [ai]}, config))
    answers = {m.tool_call_id: m for m in out["messages"]}
    assert CALLS["book_flight"] == 1 and CALLS["search_web"] == 1
    assert sorted(answers[i].status for i in "ab") == ["error", "success"]
    blocked = next(answers[i] for i in "ab" if answers[i].status == "error")
    assert envelope(blocked)["error"] == "duplicate_call"
    assert {answers[i].status for i in "cd"} == {"success"}  # the read is reused


def test_a_new_message_without_an_id_is_a_new_scope() -> None:
    """Two direct invocations with different messages (fresh call ids) both run."""
    from langgraph.runtime import Runtime

    from langchain_resilient_tools import ResilientToolNode

    node = ResilientToolNode([book_tool()])
    config: Any = {"configurable": {"__pregel_runtime": Runtime()}}
    for call_id in ("x1", "x2"):
        ai = AIMessage("", tool_calls=[tool_call("book_flight", {"city": "Oslo"}, id=call_id)])
        out = node.invoke({"messages": [ai]}, config)
        assert out["messages"][0].status == "success"
    assert CALLS["book_flight"] == 2


# -- identical calls in one step are one logical call (invariant 8) ----------------------


def down_service(name: str) -> Any:
    """A read whose service is down: every execution fails with a transient error."""

    def fail(query: str) -> str:
        raise ConnectionError("service unavailable")

    return counted(name, fail)


def test_identical_failing_reads_share_one_chain_of_attempts(
    harness: Harness, testing_mode: Any
) -> None:
    """Three identical reads of a down service: one chain of three attempts (3
    executions, the backoff waits of one call), and the same failure for all three."""
    calls = [tool_call("search_down", {"query": "q"}, id=i) for i in ("a", "b", "c")]
    result = harness.run([down_service("search_down")], calls)
    assert CALLS["search_down"] == 3
    assert len(testing_mode.sleeps) == 2  # the waits of one chain: the time of one call
    bodies = [envelope(result[i]) for i in "abc"]
    assert {b["error"] for b in bodies} == {"transient_failure"}
    assert len({b["message"] for b in bodies}) == 1
    assert sorted(b["attempts"] for b in bodies) == [0, 0, 3]  # the twins did not run
    assert all(result[i].tool_call_id == i for i in "abc")
    if harness.adapter != "tool":
        assert sorted(r["tool_call_id"] for r in result.tool_errors) == ["a", "b", "c"]
    answered_once(result.state)


def test_the_first_twin_runs_and_its_twins_share_its_failure(harness: Harness) -> None:
    """The first of identical calls in the AIMessage runs; its twins get its failure
    (a write too: it is not run again, and not told duplicate_call)."""
    if harness.mode == "sync" and harness.adapter == "tool":
        pytest.skip("ToolNode's own sync dispatch decides which identical call starts first")
    tools = [failing_tool("get_city", ToolException("no such city")),
             failing_tool("create_ticket", ToolException("queue is closed"))]  # fmt: skip
    calls = [
        tool_call("get_city", {"query": "x"}, id="r1"),
        tool_call("create_ticket", {"query": "x"}, id="w1"),
        tool_call("get_city", {"query": "x"}, id="r2"),
        tool_call("create_ticket", {"query": "x"}, id="w2"),
    ]
    result = harness.run(tools, calls)
    assert CALLS == {"get_city": 1, "create_ticket": 1}
    for first, twin in (("r1", "r2"), ("w1", "w2")):
        assert envelope(result[first])["error"] == envelope(result[twin])["error"] == "tool_error"
        assert envelope(result[first])["attempts"] == 1 and envelope(result[twin])["attempts"] == 0
        assert envelope(result[first])["message"] == envelope(result[twin])["message"]
    answered_once(result.state)


def test_twins_share_a_fallback_answer(harness: Harness) -> None:
    calls = [tool_call("search_down", {"query": "q"}, id=i) for i in ("a", "b")]
    policy = ToolPolicy(fallback="no results right now", retry={"max_attempts": 2})
    result = harness.run([down_service("search_down")], calls, policy=policy)
    assert CALLS["search_down"] == 2  # one chain of two attempts
    assert result["a"].status == result["b"].status == "success"
    assert result["a"].content == result["b"].content
    assert "no results right now" in str(result["a"].content)
    assert {served_by(result[i]) for i in "ab"} == {"fallback"}


def test_a_twin_that_starts_first_still_waits_for_the_first_call(harness: Harness) -> None:
    """Which twin runs does not depend on the order the calls are started in: under
    create_agent, another middleware holds the first call back until its twin has
    started; the first call still runs, and the twin shares its outcome."""
    if harness.adapter != "middleware":
        pytest.skip("the order of tasks is create_agent's; the node orders its own calls")
    import threading

    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import HumanMessage

    from langchain_resilient_tools import ResilientToolsMiddleware
    from langchain_resilient_tools.testing import ScriptedChatModel

    twin_started = threading.Event()
    atwin_started = asyncio.Event()

    class HoldFirst(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            if request.tool_call["id"] == "first":
                twin_started.wait(5)
            else:
                twin_started.set()
            return handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            if request.tool_call["id"] == "first":
                await atwin_started.wait()
            else:
                atwin_started.set()
            return await handler(request)

    calls = [
        tool_call("book_flight", {"city": "Oslo"}, id="first"),
        tool_call("book_flight", {"city": "Oslo"}, id="again"),
    ]
    ai = AIMessage("", tool_calls=calls)
    agent = create_agent(
        ScriptedChatModel(script=[ai, AIMessage("done")]),
        tools=[book_tool()],
        middleware=[HoldFirst(), ResilientToolsMiddleware()],
    )
    state = harness.invoke(agent, {"messages": [HumanMessage("go")]})
    answers = by_id(state["messages"])
    assert answers["first"].content == "booked a flight to Oslo"
    data = envelope(answers["again"])
    assert data["error"] == "duplicate_call"
    assert data["previous_result"] == "booked a flight to Oslo"
    assert CALLS["book_flight"] == 1


# -- the ledger in graph state points at the thread's messages ---------------------------


def _answers(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return by_id(state["messages"])


@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "restarted"])
def test_a_result_whose_message_is_gone_is_not_reused(harness: Harness, restart: bool) -> None:
    """Once the message holding a result is removed from the thread (trimmed,
    summarized: with the model message that made the call, as trimming keeps a history
    providers accept), a repeated read runs again; a repeated write is still blocked,
    without the result it can no longer show."""
    if harness.adapter == "tool":
        pytest.skip("a wrapped tool cannot see the thread's messages")
    from langchain_core.messages import HumanMessage, RemoveMessage
    from langgraph.checkpoint.memory import InMemorySaver

    tools = [search_tool(), book_tool()]
    turns = [
        AIMessage("", tool_calls=[tool_call("search_web", {"query": "q"}, id=f"r{i}"),
                                  tool_call("book_flight", {"city": "Oslo"}, id=f"w{i}")])
        for i in (1, 2)
    ]  # fmt: skip
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "trimmed"}}
    script = [turns[0], AIMessage("done"), turns[1], AIMessage("done")]

    def payload(i: int) -> Any:
        return (
            {"messages": [HumanMessage(f"turn {i}")]}
            if harness.adapter == "middleware"
            else {"messages": [turns[i]]}
        )

    graph = harness.build(tools, checkpointer=saver, script=script)
    state = harness.invoke(graph, payload(0), config)
    gone = [m.id for m in state["messages"] if isinstance(m, (ToolMessage, AIMessage))]
    as_node = "model" if harness.adapter == "middleware" else "tools"
    graph.update_state(config, {"messages": [RemoveMessage(id=i) for i in gone]}, as_node=as_node)
    if restart:
        graph = harness.build(tools, checkpointer=saver, script=script[2:])
    state = harness.invoke(graph, payload(1), config)
    answers = _answers(state)
    assert answers["r2"].content == "results for q"  # run again, not reused
    assert CALLS == {"search_web": 2, "book_flight": 1}
    data = envelope(answers["w2"])
    assert data["error"] == "duplicate_call" and "previous_result" not in data


def test_a_result_its_message_does_not_hold_as_it_is_is_kept_in_the_ledger(
    harness: Harness,
) -> None:
    """When the answer is not the result as it is (here: cut by max_result_chars), the
    ledger keeps a copy, and a repeat after a restart still reuses it."""
    if harness.adapter == "tool":
        pytest.skip("a wrapped tool keeps its ledger in memory only")
    long = counted("search_long", lambda query: "word " * 200)
    turns = [[tool_call("search_long", {"query": "q"}, id=f"t{i}")] for i in (1, 2)]
    policy = ToolPolicy(max_result_chars=100)
    results = harness.run_turns([long], turns, policy=policy, restart_at=[1])
    entries = results[0].state["tool_ledger"]["dedup"]
    [entry] = entries.values()
    assert entry["call_id"] == "t1" and 0 < len(entry["content"]) <= 100
    last = results[-1]
    assert CALLS["search_long"] == 1
    assert "repeats an earlier identical call" in str(last["t2"].content)


def test_a_call_the_model_could_not_format_is_nobodys_twin() -> None:
    """The node parses a malformed call with placeholder arguments; a call that looks
    the same before repair is not its twin (it would wait for a call that never runs)."""
    from langchain_resilient_tools.core.tools import INVALID_KEY
    from langchain_resilient_tools.pipeline.dedup.twins import StepTwins

    calls = [
        {**tool_call("a", {}, id="bad"), INVALID_KEY: {"args": "{", "error": "cut off"}},
        tool_call("a", {}, id="ok"),
        tool_call("a", {}, id="twin"),
    ]
    twins = StepTwins.of(calls, "s")
    assert twins.firsts == (None, None, 1)
    assert dict(twins.twin_of) == {"twin": "ok"} and twins.grouped == {"ok", "twin"}
