"""The tool-side fault kit (`testing.faults`): pure draws, each fault's behaviour, the same
tool seen by everyone, and faults met through every adapter."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolArg, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import MessagesState
from langgraph.prebuilt import InjectedState, ToolNode

from langchain_resilient_tools import ResilientTool, ToolPolicy
from langchain_resilient_tools.testing import (
    Fault,
    FaultLog,
    FaultPlan,
    ServiceRefused,
    faulty_tools,
    tool_call,
    with_faults,
)
from tests.conftest import Harness
from tests.support.graphs import tools_graph

BEFORE = {Fault.REFUSED, Fault.RESET, Fault.RATE_LIMITED, Fault.UNAVAILABLE}
"""Faults raised before the tool body runs (no effect)."""


def _tools() -> tuple[BaseTool, BaseTool, list[tuple[str, Any]]]:
    done: list[tuple[str, Any]] = []

    @tool
    def get_rate(currency: str, day: int = 0) -> str:
        """The exchange rate of a currency to the euro."""
        done.append(("get_rate", currency))
        return f"1 {currency} = 0.9 EUR"

    @tool
    def create_order(item: str, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Order an item."""
        done.append(("create_order", idempotency_key))
        return f"ordered {item}"

    return get_rate, create_order, done


def first_only(fault: Fault, name: str, args: dict[str, Any], **kw: Any) -> FaultPlan:
    """A plan whose first execution of (name, args) meets `fault` and the next few none."""
    for seed in range(10_000):
        plan = FaultPlan(p=0.5, faults=(fault,), seed=seed, **kw)
        if plan.draw(name, args, 0) and not any(plan.draw(name, args, n) for n in (1, 2, 3)):
            return plan
    raise AssertionError("no seed found")


def always(fault: Fault, **kw: Any) -> FaultPlan:
    return FaultPlan(p=1.0, faults=(fault,), **kw)


# -- the plan: pure, deterministic, validated


def test_draw_is_deterministic_and_depends_on_every_input() -> None:
    plan = FaultPlan(p=0.5)
    args = {"currency": "USD", "day": 1}
    draws = [plan.draw("get_rate", args, n) for n in range(64)]
    assert draws == [FaultPlan(p=0.5).draw("get_rate", dict(reversed(args.items())), n)
                     for n in range(64)]  # fmt: skip
    assert draws != [FaultPlan(p=0.5, seed=1).draw("get_rate", args, n) for n in range(64)]
    assert draws != [plan.draw("get_other", args, n) for n in range(64)]
    assert draws != [plan.draw("get_rate", {"currency": "EUR"}, n) for n in range(64)]


def test_the_rate_of_faults_is_near_p_and_faults_are_drawn_evenly() -> None:
    plan = FaultPlan(p=0.3, seed=7)
    draws = [plan.draw("get_rate", {"currency": "USD"}, n) for n in range(2000)]
    hit = [d for d in draws if d is not None]
    assert 0.26 < len(hit) / 2000 < 0.34
    for fault in Fault:
        assert 0.10 < hit.count(fault) / len(hit) < 0.24, fault
    assert all(FaultPlan(p=0.0).draw("t", {}, n) is None for n in range(200))
    assert all(FaultPlan(p=1.0).draw("t", {}, n) is not None for n in range(200))


def test_only_the_named_tools_meet_faults() -> None:
    plan = FaultPlan(p=1.0, tools=frozenset({"create_order"}))
    assert plan.draw("create_order", {}, 0) is not None
    assert plan.draw("get_rate", {}, 0) is None


@pytest.mark.parametrize(
    "kw", [{"p": -0.1}, {"p": 1.5}, {"faults": ()}, {"stall_s": -1}, {"faults": ("nope",)}]
)
def test_an_invalid_plan_fails_at_construction(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        FaultPlan(**kw)


def test_fault_names_are_accepted_as_text() -> None:
    assert FaultPlan(faults=("refused", "stall")).faults == (Fault.REFUSED, Fault.STALL)  # type: ignore[arg-type]


# -- the same tool for everyone who looks at it


def test_name_description_and_schema_are_kept() -> None:
    get_rate, create_order, _ = _tools()
    for original in (get_rate, create_order):
        faulty = with_faults(original, FaultPlan())
        assert (faulty.name, faulty.description) == (original.name, original.description)
        assert faulty.args_schema is original.args_schema
        assert convert_to_openai_tool(faulty) == convert_to_openai_tool(original)


def test_a_plain_function_is_made_a_tool() -> None:
    def lookup(city: str) -> str:
        """Look a city up."""
        return city.upper()

    faulty = with_faults(lookup, FaultPlan(p=0.0))
    assert faulty.name == "lookup" and faulty.invoke({"city": "oslo"}) == "OSLO"


# -- each fault, called directly, sync and async


def _call(faulty: BaseTool, args: dict[str, Any], mode: str) -> Any:
    if mode == "sync":
        return faulty.invoke(args)
    return asyncio.run(faulty.ainvoke(args))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fault", sorted(BEFORE))
def test_faults_before_the_body_have_no_effect(fault: Fault, mode: str) -> None:
    get_rate, _, done = _tools()
    log = FaultLog()
    faulty = with_faults(get_rate, always(fault, retry_after_s=0.25), log=log)
    expected = {
        Fault.REFUSED: ConnectionRefusedError,
        Fault.RESET: ConnectionResetError,
        Fault.RATE_LIMITED: ServiceRefused,
        Fault.UNAVAILABLE: ServiceRefused,
    }[fault]
    with pytest.raises(expected) as raised:
        _call(faulty, {"currency": "USD"}, mode)
    assert done == [] and log.effects() == 0 and log.count(fault) == 1
    if isinstance(raised.value, ServiceRefused):
        status = 429 if fault is Fault.RATE_LIMITED else 503
        assert raised.value.status_code == status
        assert raised.value.retry_after == 0.25
        assert raised.value.headers == {"Retry-After": "0.25"}
        assert str(status) in str(raised.value)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_lost_reply_happens_after_the_effect(mode: str) -> None:
    get_rate, _, done = _tools()
    log = FaultLog()
    faulty = with_faults(get_rate, always(Fault.LOST_REPLY), log=log)
    with pytest.raises(ConnectionResetError):
        _call(faulty, {"currency": "USD"}, mode)
    assert done == [("get_rate", "USD")] and log.effects("get_rate") == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stall_runs_the_body_late(mode: str) -> None:
    get_rate, _, done = _tools()
    log = FaultLog()
    faulty = with_faults(get_rate, always(Fault.STALL, stall_s=0.01), log=log)
    assert _call(faulty, {"currency": "USD"}, mode) == "1 USD = 0.9 EUR"
    assert done and log.events[0].fault is Fault.STALL and log.effects() == 1


async def test_an_async_caller_that_gives_up_during_a_stall_prevents_the_effect() -> None:
    get_rate, _, done = _tools()
    log = FaultLog()
    faulty = with_faults(get_rate, always(Fault.STALL, stall_s=0.2), log=log)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(faulty.ainvoke({"currency": "USD"}), 0.05)
    assert done == [] and [(e.fault, e.effect) for e in log.events] == [(Fault.STALL, False)]


def test_a_sync_thread_abandoned_during_a_stall_still_runs_the_body() -> None:
    get_rate, _, done = _tools()
    log = FaultLog()
    faulty = with_faults(get_rate, always(Fault.STALL, stall_s=0.2), log=log)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(faulty.invoke, {"currency": "USD"})
        with pytest.raises(FutureTimeout):
            future.result(timeout=0.05)
        assert done == []
    assert done == [("get_rate", "USD")] and log.effects() == 1  # late, once the pool joined


async def test_an_async_only_tool_and_a_sync_only_tool_both_work_in_ainvoke() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        return f"page {url}"

    get_rate, _, _ = _tools()
    log = FaultLog()
    [afetch, aget] = faulty_tools([fetch, get_rate], FaultPlan(p=0.0), log=log)
    assert await afetch.ainvoke({"url": "a"}) == "page a"
    assert await aget.ainvoke({"currency": "USD"}) == "1 USD = 0.9 EUR"
    assert log.effects() == 2 and {e.tool for e in log.events} == {"fetch", "get_rate"}


# -- counting executions, and injected arguments


def test_each_execution_of_the_same_call_counts_on_and_the_log_clears() -> None:
    get_rate, _, _ = _tools()
    log = FaultLog()
    faulty = with_faults(get_rate, FaultPlan(p=0.0), log=log)
    for _ in range(3):
        faulty.invoke({"currency": "USD"})
    faulty.invoke({"currency": "EUR"})
    assert [(e.args["currency"], e.n) for e in log.events] == [
        ("USD", 0), ("USD", 1), ("USD", 2), ("EUR", 0),
    ]  # fmt: skip
    assert log.count(Fault.REFUSED) == 0 and log.effects() == 4
    log.clear()
    assert log.events == []


def test_an_injected_argument_is_still_injected_and_not_part_of_the_key() -> None:
    _, create_order, done = _tools()
    log = FaultLog()
    faulty = with_faults(create_order, FaultPlan(p=0.0), log=log)
    for key in ("k1", "k2"):
        call = tool_call("create_order", {"item": "tea", "idempotency_key": key}, id=key)
        answer = faulty.invoke(call)
        assert isinstance(answer, ToolMessage) and answer.content == "ordered tea"
    assert done == [("create_order", "k1"), ("create_order", "k2")]
    assert [(e.args, e.n) for e in log.events] == [({"item": "tea"}, 0), ({"item": "tea"}, 1)]


def test_a_plain_tool_node_injects_state_and_meets_the_fault() -> None:
    seen: list[int] = []

    @tool
    def count_messages(label: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
        """Count the messages so far."""
        seen.append(len(state["messages"]))
        return f"{label}: {len(state['messages'])}"

    plan = first_only(Fault.REFUSED, "count_messages", {"label": "a"})
    app = tools_graph(
        ToolNode([with_faults(count_messages, plan)], handle_tool_errors=True), MessagesState
    )
    ai = AIMessage("", tool_calls=[tool_call("count_messages", {"label": "a"}, id="1")])
    first = app.invoke({"messages": [ai]})["messages"][-1]
    assert first.status == "error" and "ConnectionRefusedError" in str(first.content)
    again = app.invoke({"messages": [ai]})["messages"][-1]
    assert (again.status, again.content, seen) == ("success", "a: 1", [1])


# -- through every adapter: what the pipeline makes of each fault

READ_RECOVERS = [Fault.REFUSED, Fault.RESET, Fault.LOST_REPLY, Fault.STALL,
                 Fault.RATE_LIMITED, Fault.UNAVAILABLE]  # fmt: skip


@pytest.mark.parametrize("fault", READ_RECOVERS)
def test_a_read_that_meets_a_fault_once_is_retried_and_succeeds(
    harness: Harness, fault: Fault
) -> None:
    get_rate, _, _ = _tools()
    args = {"currency": "USD"}
    log = FaultLog()
    # The timeout leaves the second attempt room on a loaded machine (a GC pause or a
    # starved thread can take 50 ms); only the stall waits it out.
    plan = first_only(fault, "get_rate", args, stall_s=1.0, retry_after_s=0.0)
    result = harness.run(
        [with_faults(get_rate, plan, log=log)],
        [tool_call("get_rate", args, id="1")],
        policy=ToolPolicy(timeout=0.4),
    )
    assert (result["1"].status, result["1"].content) == ("success", "1 USD = 0.9 EUR")
    assert [e.fault for e in log.events if e.n == 0] in ([fault], [])  # a stall ends late
    assert any(e.n == 1 and e.fault is None and e.effect for e in log.events)


@pytest.mark.parametrize(
    ("fault", "answer", "effects"),
    [
        (Fault.REFUSED, "success", 1),  # provably not sent: retried as a read is
        (Fault.RATE_LIMITED, "success", 1),
        (Fault.UNAVAILABLE, "success", 1),
        (Fault.RESET, "unknown_outcome", 0),  # ambiguous: never sent again blindly
        (Fault.LOST_REPLY, "unknown_outcome", 1),
    ],
)
def test_a_write_is_retried_only_when_the_fault_proves_it_did_not_happen(
    harness: Harness, fault: Fault, answer: str, effects: int
) -> None:
    _, create_order, done = _tools()
    args = {"item": "tea"}
    log = FaultLog()
    plan = first_only(fault, "create_order", args, retry_after_s=0.0)
    result = harness.run(
        [with_faults(create_order, plan, log=log)], [tool_call("create_order", args, id="1")]
    )
    message = result["1"]
    got = "success" if message.status == "success" else json.loads(str(message.content))["error"]
    assert (got, log.effects(), len(done)) == (answer, effects, effects)


def test_resilient_tool_wraps_a_faulty_tool() -> None:
    get_rate, _, _ = _tools()
    log = FaultLog()
    plan = first_only(Fault.REFUSED, "get_rate", {"currency": "USD"})
    wrapped = ResilientTool.wrap(with_faults(get_rate, plan, log=log))
    assert wrapped.invoke({"currency": "USD"}) == "1 USD = 0.9 EUR"
    assert [e.fault for e in log.events] == [Fault.REFUSED, None]


def test_concurrent_executions_are_all_recorded() -> None:
    get_rate, _, _ = _tools()
    log = FaultLog()
    faulty = with_faults(get_rate, FaultPlan(p=0.0), log=log)
    threads = [
        threading.Thread(target=faulty.invoke, args=({"currency": "USD"},)) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(e.n for e in log.events) == list(range(8))


def test_the_testing_surface_is_pinned_and_sorted() -> None:
    import langchain_resilient_tools.testing as testing

    assert testing.__all__ == [
        "Fault", "FaultEvent", "FaultLog", "FaultPlan", "FaultyChatModel", "ModelFaultPlan",
        "ScriptedChatModel", "ServiceRefused", "Slip", "faulty_message", "faulty_tools",
        "invalid_call", "slip_call", "tool_call", "with_faults",
    ]  # fmt: skip
    assert sorted(testing.__all__) == testing.__all__
    assert all(getattr(testing, name) is not None for name in testing.__all__)
