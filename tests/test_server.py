"""The example app (examples/langgraph_server) served by `langgraph dev`, driven by `langgraph-sdk`.

One server for the module (ten jobs at once); the restart test starts its own twice in
one folder. What reaches a service is counted in the server's call log
(`tests.lgserver`), since the tools run in another process. The write journal is read
through the SDK's store API and decoded as the package wrote it (`state.backend.decode`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph_api", reason="langgraph-cli[inmem] (Python 3.11+) is not installed")
from langgraph_sdk import get_client

from langchain_resilient_tools.core.idempotency import derive_key
from langchain_resilient_tools.pipeline.journal.logic import args_digest
from langchain_resilient_tools.state.backend import decode
from langchain_resilient_tools.text.messages import JOURNAL_REPLAY
from tests import lgserver

pytestmark = pytest.mark.slow  # `langgraph dev` subprocesses: CI runs it on one Python

SECRET = "hunter2"
TRIP_CALLS = {
    "call_search",
    "call_report",
    "call_customer",
    "call_typo",
    "call_fixable",
    "call_cut",
}
BREAKER_THRESHOLD, RATE_ATTEMPTS = 3, 2
"""The example's breaker of `get_exchange_rate` and its attempts per call."""
JOURNAL = ["langchain_resilient_tools", "journal"]
"""The write journal's namespace in the server's store."""
BOOKED = "booked a room at Casa Lisboa"
"""The example's `book_hotel` answer (its `book` script)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lgserver.Server]:
    app = lgserver.copy_example(tmp_path_factory.mktemp("server") / "app")
    running = lgserver.start(app)
    yield running
    running.stop()
    assert running.trouble() == []  # nothing fell back from the store or blocked the loop


def connect(server: lgserver.Server) -> Any:
    """An SDK client of `server` (no API key: a local server needs none)."""
    return get_client(url=server.url, api_key=None)


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text}]}


def answers(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tool messages of a thread state, by tool call id (the last answer wins)."""
    return {m["tool_call_id"]: m for m in state["values"]["messages"] if m["type"] == "tool"}


def errors_of(state: dict[str, Any]) -> list[str]:
    return [record["error"] for record in state["values"].get("tool_errors", [])]


def entry_of(
    entries: dict[str, dict[str, Any]], thread: str, tool: str, call_id: str, *,
    rerun: bool = False,
) -> dict[str, Any] | None:  # fmt: skip
    """The journal's entry of one call (keyed by the tool, its idempotency key and the
    step of the thread that issued it, which the entry records), or `None`."""
    found = [
        v for k, v in entries.items()
        if k.startswith(f"{tool}:{derive_key(thread, tool, call_id, v.get('step'))}:")
        and k.endswith(":rerun") == rerun
    ]  # fmt: skip
    assert len(found) <= 1, found
    return found[0] if found else None


async def journal(client: Any) -> dict[str, dict[str, Any]]:
    """Every entry of the write journal in the server's store, by key, decoded."""
    entries: dict[str, dict[str, Any]] = {}
    while True:
        page = (await client.store.search_items(JOURNAL, limit=100, offset=len(entries)))["items"]
        entries.update((item["key"], decode(item["value"])) for item in page)
        if len(page) < 100:
            return entries


def served_by(message: dict[str, Any]) -> str | None:
    record = (message.get("response_metadata") or {}).get("resilience") or {}
    found: str | None = record.get("served_by")
    return found


def assert_booked_once(receipt: dict[str, Any]) -> None:
    """`receipt` is the journal's record of the example's booking: a receipt (its intent,
    completed), with the answer the model got and a digest of the arguments only."""
    assert receipt["kind"] == "receipt" and receipt["outcome"] == "success"
    assert receipt["tool"] == "book_hotel"
    assert receipt["content"] == BOOKED
    assert receipt["args"] == args_digest({"hotel": "Casa Lisboa"})
    assert receipt["ended"] >= receipt["started"] > 0
    assert "owner" not in receipt and "lease_until" not in receipt


@pytest.fixture(scope="module")
def trip(server: lgserver.Server) -> dict[str, Any]:
    """One `trip` run of the travel graph, streamed with updates and custom events."""

    async def run() -> dict[str, Any]:
        async with connect(server) as client:
            thread = await client.threads.create()
            chunks = [
                (chunk.event, chunk.data)
                async for chunk in client.runs.stream(
                    thread["thread_id"], "travel", input=human("trip to Lisbon"),
                    stream_mode=["updates", "custom"],
                )
            ]  # fmt: skip
            state = await client.threads.get_state(thread["thread_id"])
        return {"thread_id": thread["thread_id"], "chunks": chunks, "state": state}

    return asyncio.run(run())


def test_every_call_is_answered_and_tool_errors_are_in_the_thread_state(
    trip: dict[str, Any], server: lgserver.Server
) -> None:
    state = trip["state"]
    messages = state["values"]["messages"]
    turn = next(m for m in messages if m["type"] == "ai" and m.get("tool_calls"))
    asked = {c["id"] for c in turn["tool_calls"]} | {c["id"] for c in turn["invalid_tool_calls"]}
    assert asked == TRIP_CALLS
    tool_ids = [m["tool_call_id"] for m in messages if m["type"] == "tool"]
    assert sorted(tool_ids) == sorted(TRIP_CALLS)  # every call answered, once
    answered = answers(state)
    assert json.loads(answered["call_search"]["content"]) == {
        "flights": [{"to": "Lisbon", "price": 129}]
    }  # a dropped connection, retried
    assert answered["call_fixable"]["status"] == "success"  # repaired
    envelope = {i: json.loads(answered[i]["content"])["error"] for i in TRIP_CALLS - {"call_search", "call_fixable"}}  # fmt: skip
    assert envelope == {
        "call_report": "timeout",
        "call_customer": "tool_error",
        "call_typo": "unknown_tool",
        "call_cut": "malformed_call",
    }
    assert sorted(errors_of(state)) == sorted(envelope.values())
    assert SECRET not in json.dumps(messages)
    assert (messages[-1]["type"], messages[-1]["content"]) == ("ai", "Here is your trip.")
    assert state["next"] == []
    assert server.calls(trip["thread_id"], "search_flights") == 4  # each failed once, retried
    assert server.calls(trip["thread_id"], "lookup_usr") == 0


def test_stream_shows_the_tools_custom_events_as_they_happen(trip: dict[str, Any]) -> None:
    events = [(kind, data) for kind, data in trip["chunks"] if kind in ("custom", "updates")]
    custom = [data for kind, data in events if kind == "custom"]
    assert custom.count({"tool": "search_flights", "progress": "searching Lisbon"}) == 2
    porto = {"tool": "search_flights", "progress": "searching Porto"}
    assert custom.count(porto) == 2  # the repaired call, retried too
    nodes = [next(iter(data)) for kind, data in events if kind == "updates"]
    assert nodes == ["agent", "tools", "agent"]
    tools_update = next(i for i, (kind, data) in enumerate(events) if "tools" in data)
    first_custom = next(i for i, (kind, _) in enumerate(events) if kind == "custom")
    assert first_custom < tools_update  # streamed while the step ran, not after it
    (update,) = [data["tools"] for kind, data in events if kind == "updates" and "tools" in data]
    assert {m["tool_call_id"] for m in update["messages"]} == TRIP_CALLS


EXPECTED = {
    "run_again": ("A person reviewed this call", "order ", 2),
    "done": ("confirmed that it took effect", "order confirmed by phone", 1),
    "give_up": ('"error": "unknown_outcome"', '"decided_by": "person"', 1),
}


@pytest.mark.parametrize("choice", sorted(EXPECTED))
async def test_a_person_decides_an_unknown_outcome_over_the_api(
    server: lgserver.Server, choice: str
) -> None:
    async with connect(server) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "travel", input=human("order tea"))
        state = await client.threads.get_state(thread)
        before = await journal(client)
    assert state["next"] == ["tools"]
    (question,) = state["interrupts"]
    review = question["value"]
    assert (review["kind"], review["tool"], review["args"]) == (
        "unknown_outcome",
        "create_order",
        {"item": "tea"},
    )
    assert set(review["choices"]) == set(EXPECTED)
    assert server.calls(thread, "create_order") == 1  # it ran once, and is not run again yet
    lost = entry_of(before, thread, "create_order", "call_order")
    assert lost is not None  # a resume after a crash would be told the same
    assert (lost["kind"], lost["outcome"], lost["failure"]["error"]) == (
        "receipt",
        "error",
        "unknown_outcome",
    )

    resume: dict[str, Any] = {"choice": choice}
    if choice == "done":
        resume["result"] = "order confirmed by phone"
    async with connect(server) as client:
        await client.runs.wait(thread, "travel", command={"resume": resume})
        state = await client.threads.get_state(thread)
        after = await journal(client)
    assert state["next"] == [] and not state["interrupts"]
    note, content, runs = EXPECTED[choice]
    answer = answers(state)["call_order"]["content"]
    assert note in answer and content in answer
    assert server.calls(thread, "create_order") == runs
    rerun = entry_of(after, thread, "create_order", "call_order", rerun=True)  # apart
    assert (rerun is not None) == (choice == "run_again")
    if rerun is not None:
        assert rerun["outcome"] == "success" and rerun["content"].startswith("order ")
        assert rerun["content"] in answer
    assert state["values"]["messages"][-1]["content"] == "Your order is in."


async def test_concurrent_runs_share_one_breaker_in_the_server_store(
    server: lgserver.Server,
) -> None:
    """Ten runs at once, each on its own thread, against the down rates service."""

    async def ask() -> tuple[str, dict[str, Any]]:
        async with connect(server) as client:
            thread = (await client.threads.create())["thread_id"]
            await client.runs.wait(thread, "rates_agent", input=human("rates?"))
            return thread, await client.threads.get_state(thread)

    runs = await asyncio.gather(*(ask() for _ in range(10)))
    threads = [thread for thread, _ in runs]
    called = sum(server.calls(t, "get_exchange_rate") for t in threads)
    print(f"the down service got {called} calls from {len(runs)} concurrent runs")
    # Without a shared breaker: 10 x RATE_ATTEMPTS calls. With one, the threshold, plus at
    # most one call in flight per other run when it opened.
    assert BREAKER_THRESHOLD <= called <= BREAKER_THRESHOLD + len(runs) - 1
    kinds = []
    for _, state in runs:
        answered = answers(state)
        assert answered["call_weather"]["content"] == "sunny in Oslo"
        kinds.append(json.loads(answered["call_rate"]["content"])["error"])
        assert errors_of(state) == kinds[-1:]
    assert set(kinds) <= {"transient_failure", "circuit_open"} and "circuit_open" in kinds

    async with connect(server) as client:
        found = await client.store.search_items(["langchain_resilient_tools", "breaker"])
    assert [item["key"] for item in found["items"]] == ["get_exchange_rate"]  # one breaker

    thread, state = await ask()  # later runs do not reach the service at all
    assert json.loads(answers(state)["call_rate"]["content"])["error"] == "circuit_open"
    assert server.calls(thread, "get_exchange_rate") == 0


async def test_a_write_keeps_its_receipt_in_the_server_store_and_a_resume_answers_from_it(
    server: lgserver.Server,
) -> None:
    """`book`: a booking and a question for the traveller in one step. The question stops
    the run; the resume runs the step again, and the booking, which finished before the
    question, is answered from its receipt in the server's store."""
    async with connect(server) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "travel", input=human("book a room in Lisbon"))
        asked = await client.threads.get_state(thread)
        before = await journal(client)
    (question,) = asked["interrupts"]
    assert question["value"] == {"question": "Window or aisle?"}
    assert server.calls(thread, "book_hotel") == 1
    booked = entry_of(before, thread, "book_hotel", "call_book")
    assert booked is not None
    assert_booked_once(booked)
    # The question's own intent was withdrawn when it asked: it runs again on resume.
    assert entry_of(before, thread, "ask_traveller", "call_ask") is None

    async with connect(server) as client:
        await client.runs.wait(thread, "travel", command={"resume": "window"})
        state = await client.threads.get_state(thread)
        after = await journal(client)
    answered = answers(state)
    assert BOOKED in answered["call_book"]["content"]
    assert JOURNAL_REPLAY in answered["call_book"]["content"]
    assert served_by(answered["call_book"]) == "journal"
    assert answered["call_ask"]["content"] == "window"
    assert server.calls(thread, "book_hotel") == 1  # not booked twice
    assert state["next"] == []
    assert state["values"]["messages"][-1]["content"] == "Your room is booked."
    asked_entry = entry_of(after, thread, "ask_traveller", "call_ask")
    assert asked_entry is not None and asked_entry["content"] == "window"


def test_a_clean_restart_keeps_the_breaker_the_journal_the_threads_and_a_pending_question(
    tmp_path: Path,
) -> None:
    """Two servers, one after the other, in one folder (the in-memory runtime's files).

    The journal: a booking made before the restart, in a step a question then stopped,
    is answered from its receipt after it (the step's answers are not in the checkpoint,
    and the new server process holds nothing of the old one's)."""
    app = lgserver.copy_example(tmp_path / "app")

    async def kept_journal(server: lgserver.Server) -> dict[str, dict[str, Any]]:
        async with connect(server) as client:
            return await journal(client)

    async def turn(
        server: lgserver.Server, thread: str | None = None, *, graph: str = "rates_agent",
        **run: Any,
    ) -> tuple[str, dict[str, Any]]:  # fmt: skip
        async with connect(server) as client:
            thread = thread or (await client.threads.create())["thread_id"]
            await client.runs.wait(thread, graph, **(run or {"input": human("rates?")}))
            return thread, await client.threads.get_state(thread)

    first = lgserver.start(app, jobs=1)
    try:
        thread, _ = asyncio.run(turn(first))
        _, before = asyncio.run(turn(first, thread))  # the third failure opens the circuit
        order, asked = asyncio.run(turn(first, graph="travel", input=human("order tea")))
        booking, seat = asyncio.run(turn(first, graph="travel", input=human("book a room")))
    finally:
        first.stop()
    assert seat["interrupts"][0]["value"] == {"question": "Window or aisle?"}
    assert first.calls(booking, "book_hotel") == 1
    assert json.loads(answers(before)["call_rate"]["content"])["error"] == "circuit_open"
    assert first.calls(thread, "get_exchange_rate") == BREAKER_THRESHOLD
    assert asked["next"] == ["tools"] and first.calls(order, "create_order") == 1

    second = lgserver.start(app, jobs=1)
    try:
        _, after = asyncio.run(turn(second, thread))
        done = {"choice": "done", "result": "order 7 placed"}
        _, resumed = asyncio.run(turn(second, order, graph="travel", command={"resume": done}))
        kept_after = asyncio.run(kept_journal(second))
        _, booked = asyncio.run(turn(second, booking, graph="travel", command={"resume": "aisle"}))
    finally:
        second.stop()
    assert first.trouble() == []  # both servers wrote to the one log
    kept = before["values"]["messages"]
    assert after["values"]["messages"][: len(kept)] == kept  # the thread survived
    assert json.loads(answers(after)["call_rate"]["content"])["error"] == "circuit_open"
    assert second.calls(thread, "get_exchange_rate") == BREAKER_THRESHOLD  # not called again
    assert "order 7 placed" in answers(resumed)["call_order"]["content"]  # the question survived
    assert resumed["next"] == [] and second.calls(order, "create_order") == 1
    kept_booking = entry_of(kept_after, booking, "book_hotel", "call_book")
    assert kept_booking is not None
    assert_booked_once(kept_booking)
    booking_answer = answers(booked)["call_book"]
    assert served_by(booking_answer) == "journal" and BOOKED in booking_answer["content"]
    assert answers(booked)["call_ask"]["content"] == "aisle"
    assert second.calls(booking, "book_hotel") == 1  # answered from the journal: not run again


def test_the_documented_client_reads_the_server_url_from_the_environment(
    server: lgserver.Server, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/langgraph-server.md's client, as written: `langgraph dev` may not be on
    2024 (here it is on a free port), and the client takes the URL it printed."""
    doc = (lgserver.ROOT / "docs" / "langgraph-server.md").read_text()
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S) if "langgraph_sdk" in b
    ]
    assert server.port != 2024 and str(server.port) not in block
    monkeypatch.setenv("LANGGRAPH_URL", server.url)
    exec(compile(block, "docs/langgraph-server.md", "exec"), {"__name__": "docs_example"})
    printed = capsys.readouterr().out
    assert "custom {'tool': 'search_flights', 'progress': 'searching Lisbon'}" in printed
    assert "'error': 'timeout'" in printed and "lost contact with its service" in printed
