"""Idempotency keys: a write whose service honours keys is retried safely.

A fake payment service charges once per key. The pipeline hands the tool a key that is
the same for every attempt, for a re-run of the same tool call and across an interrupt
and resume, and never shows it to the model.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from langchain_resilient_tools import ResilientTool, RetryPolicy, ToolPolicy
from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.core.errors import UsageError
from langchain_resilient_tools.core.idempotency import (
    IdempotencyInfo,
    derive_key,
    execution_args,
    key_for,
)
from langchain_resilient_tools.core.policy import PolicyResolver, ResolvedPolicy
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.calls import make_call

FLAGGED = {"create_payment": ToolPolicy(idempotency_key=True)}
"""Nothing but a hung attempt waits for the (default) timeout: a healthy attempt is never
cut short on a loaded machine."""
LOST_REPLY_TIMEOUT_S = 2.0
"""The attempt timeout of the tests whose first reply is lost (the tool hangs): the only
thing that ends that attempt, and also all the time the healthy retry has to answer, so
it is generous (a loaded machine stretches a 5 ms call to most of a second)."""
UNFLAGGED = {"create_payment": ToolPolicy(timeout=0.2)}
"""One hung attempt, cut at 0.2 s: nothing healthy runs under this timeout."""


class PaymentService:
    """A fake payment API that honours idempotency keys: one charge per key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[str | None] = []
        """The key of every request received, in order."""
        self.reached = threading.Event()
        """Set by the first request (an attempt cut at its timeout may get here late)."""
        self.ledger: list[tuple[str, int]] = []
        """Money actually taken: (charge id, amount)."""
        self._by_key: dict[str, str] = {}

    def charge(self, amount: int, key: str | None = None) -> str:
        with self._lock:
            self.requests.append(key)
            self.reached.set()
            if key is not None and key in self._by_key:
                return self._by_key[key]  # a repeat: answered with the first charge
            charge_id = f"ch_{len(self.ledger) + 1}"
            self.ledger.append((charge_id, amount))
            if key is not None:
                self._by_key[key] = charge_id
            return charge_id


def payment_tool(
    service: PaymentService, *, lose_first_reply: threading.Event | None = None
) -> BaseTool:
    """`create_payment`; with `lose_first_reply`, the first attempt charges, then hangs."""
    attempts = {"n": 0}
    lock = threading.Lock()

    def create_payment(amount: int, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Charge the customer `amount` cents."""
        charge_id = service.charge(amount, idempotency_key)
        with lock:
            attempts["n"] += 1
            first = attempts["n"] == 1
        if first and lose_first_reply is not None:
            lose_first_reply.wait(30)  # the charge went through; the reply never comes
        return f"charged {amount}: {charge_id}"

    return StructuredTool.from_function(create_payment)


def everything_shown(result_state: dict[str, Any]) -> str:
    """Every message (content and metadata) and error record, as one string."""
    return json.dumps(messages_to_dict(result_state["messages"]), default=str) + json.dumps(
        result_state.get("tool_errors", []), default=str
    )


def _snapshot(harness: Harness, graph: Any, config: dict[str, Any]) -> Any:
    if harness.mode == "sync":
        return graph.get_state(config)
    assert harness.loop is not None
    return harness.loop.run_until_complete(graph.aget_state(config))


# -- through every adapter, sync and async ------------------------------------------


@pytest.mark.realtime
def test_timed_out_write_is_retried_with_the_same_key(harness: Harness) -> None:
    """Only a real timeout cuts the hung first attempt (the layer's own, not an error the
    tool raises); the retry answers well within the same generous timeout, so the count
    of attempts does not depend on the machine's speed (it waits 2 s per adapter)."""
    service = PaymentService()
    tool = payment_tool(service, lose_first_reply=harness.hang_event())
    config = {"configurable": {"thread_id": "t-pay"}}
    policy = ToolPolicy(timeout=LOST_REPLY_TIMEOUT_S, idempotency_key=True)
    result = harness.run(
        [tool],
        [tool_call("create_payment", {"amount": 500}, id="c1")],
        policies={"create_payment": policy},
        config=config,
    )
    message = result["c1"]
    assert message.status == "success", message.content
    assert message.content == "charged 500: ch_1"
    key = service.requests[0]
    assert key is not None and len(key) == 32
    assert service.requests == [key, key]  # two attempts, one key
    assert service.ledger == [("ch_1", 500)]  # charged once
    assert message.response_metadata["resilience"]["attempts"] == 2
    assert key not in everything_shown(result.state)


def test_without_the_flag_a_write_is_never_rerun(harness: Harness) -> None:
    service = PaymentService()
    tool = payment_tool(service, lose_first_reply=harness.hang_event())
    result = harness.run(
        [tool], [tool_call("create_payment", {"amount": 500}, id="c1")], policies=UNFLAGGED
    )
    data = json.loads(str(result["c1"].content))
    assert data["error"] == "unknown_outcome" and data["attempts"] == 1
    # The attempt cut at 0.2 s may reach the service after the answer (a loaded machine);
    # a second attempt, had there been one, would have answered before it.
    assert service.reached.wait(30)
    assert len(service.requests) == 1  # executed once, whatever failed


def test_two_turns_reusing_a_call_id_get_two_keys(harness: Harness) -> None:
    """Models repeat call ids (``call_0`` in every turn): the second turn's write is a new
    request, not a resend the service may drop (issue 31)."""
    service = PaymentService()
    turns = [[tool_call("create_payment", {"amount": n}, id="call_0")] for n in (7, 8)]
    results = harness.run_turns([payment_tool(service)], turns, policies=FLAGGED)
    assert results[1]["call_0"].content == "charged 8: ch_2"
    assert service.ledger == [("ch_1", 7), ("ch_2", 8)]  # both charges taken
    assert len(service.requests) == 2 and len(set(service.requests)) == 2


def test_each_run_without_a_checkpointer_is_a_new_request(harness: Harness) -> None:
    """Without a checkpointer nothing can resume a run: a second run of the same tool
    call on the same thread id is a new request, with a new key."""
    service = PaymentService()
    config = {"configurable": {"thread_id": "t-again"}}
    calls = [tool_call("create_payment", {"amount": 7}, id="c1")]
    first = harness.run([payment_tool(service)], calls, policies=FLAGGED, config=config)
    second = harness.run([payment_tool(service)], calls, policies=FLAGGED, config=config)
    assert (first["c1"].content, second["c1"].content) == ("charged 7: ch_1", "charged 7: ch_2")
    assert len(set(service.requests)) == 2


def test_key_survives_interrupt_and_resume(harness: Harness) -> None:
    service = PaymentService()
    seen: list[str] = []

    def create_payment(amount: int, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Charge `amount` cents after a human approves."""
        seen.append(idempotency_key)
        if interrupt({"approve_charge": amount}) != "approve":
            return "not approved"
        return service.charge(amount, idempotency_key)

    tool = StructuredTool.from_function(create_payment)
    ai = AIMessage("", tool_calls=[tool_call("create_payment", {"amount": 900}, id="pay-1")])
    graph = harness.build(
        [tool],
        policies={"create_payment": ToolPolicy(idempotency_key=True)},
        checkpointer=InMemorySaver(),
        ai=ai,
    )
    config = {"configurable": {"thread_id": "order-42"}}
    payload = {"messages": [HumanMessage("pay")] if harness.adapter == "middleware" else [ai]}
    paused = harness.invoke(graph, payload, config)
    assert "__interrupt__" in paused
    assert service.ledger == []
    step = f"tools@{_snapshot(harness, graph, config).metadata['step'] + 1}"
    final = harness.invoke(graph, Command(resume="approve"), config)
    key = derive_key("order-42", "create_payment", "pay-1", step)
    assert seen == [key, key]  # the tool started twice (before and after the resume)
    assert service.requests == [key] and service.ledger == [("ch_1", 900)]
    answers = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in answers] == [("pay-1", "ch_1")]
    assert key not in everything_shown(final)


def test_model_cannot_choose_the_key(harness: Harness) -> None:
    service = PaymentService()
    args = {"amount": 5, "idempotency_key": "model-made"}
    result = harness.run(
        [payment_tool(service)], [tool_call("create_payment", args, id="c1")], policies=FLAGGED
    )
    assert "model-made" not in service.requests
    assert len(result.messages) == 1


def test_key_is_scrubbed_from_tool_errors(harness: Harness) -> None:
    def create_refund(amount: int, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Refund `amount` cents."""
        raise ValueError(f"refund request {idempotency_key} exceeds the original charge")

    policy = ToolPolicy(idempotency_key=lambda info: f"refund-{info.tool_call_id}-once")
    result = harness.run(
        [StructuredTool.from_function(create_refund)],
        [tool_call("create_refund", {"amount": 5}, id="r1")],
        policies={"create_refund": policy},
    )
    message = result["r1"]
    data = json.loads(str(message.content))
    assert data["error"] == "tool_error"
    assert "exceeds the original charge" in data["message"]  # the rest is still shown
    assert "refund-r1-once" not in everything_shown(result.state)


def test_callable_builds_the_key(harness: Harness) -> None:
    service = PaymentService()
    infos: list[IdempotencyInfo] = []

    def build(info: IdempotencyInfo) -> str:
        infos.append(info)
        return f"{info.thread_id}:{info.tool_name}:{info.args['amount']}"

    result = harness.run(
        [payment_tool(service)],
        [tool_call("create_payment", {"amount": 12}, id="c9")],
        policies={"create_payment": ToolPolicy(idempotency_key=build)},
        config={"configurable": {"thread_id": "t9"}},
    )
    assert result["c9"].status == "success"
    assert service.requests == ["t9:create_payment:12"]
    assert [(i.tool_call_id, dict(i.args)) for i in infos] == [("c9", {"amount": 12})]
    assert infos[0].position is not None  # run by a graph: where the call was issued


def test_key_is_in_the_config_the_tool_is_invoked_with(harness: Harness) -> None:
    service = PaymentService()

    def book_room(room: str, config: RunnableConfig) -> str:
        """Book `room` (reads the key from its config)."""
        return service.charge(1, config["configurable"].get("idempotency_key"))

    tool = StructuredTool.from_function(book_room)
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {"room"}
    calls = [tool_call("book_room", {"room": "101"}, id="b1")]
    config = {"configurable": {"thread_id": "t-book"}}
    flagged = {"book_room": ToolPolicy(idempotency_key=True)}
    result = harness.run([tool], calls, policies=flagged, config=config)
    assert result["b1"].content == "ch_1"
    assert len(service.requests[0] or "") == 32
    harness.run([tool], calls, config=config)  # without the flag: no key in the config
    assert service.requests[1] is None


def test_flagged_duplicate_reuses_the_earlier_answer(harness: Harness) -> None:
    service = PaymentService()
    calls = [
        tool_call("create_payment", {"amount": 3}, id="a"),
        tool_call("create_payment", {"amount": 3}, id="b"),
    ]
    result = harness.run([payment_tool(service)], calls, policies=FLAGGED)
    assert len(service.ledger) == 1 and len(service.requests) == 1
    for call_id in ("a", "b"):
        assert result[call_id].status == "success"
        assert "charged 3: ch_1" in str(result[call_id].content)


# -- schema and units -----------------------------------------------------------------


def test_key_is_not_in_any_schema() -> None:
    tool = payment_tool(PaymentService())
    wrapped = ResilientTool.wrap(tool, policy=ToolPolicy(idempotency_key=True))
    for t in (tool, wrapped):
        assert set(t.tool_call_schema.model_json_schema()["properties"]) == {"amount"}
        assert "idempotency_key" not in json.dumps(convert_to_openai_tool(t))


def test_direct_invocation_passes_a_key_and_honours_a_given_one() -> None:
    service = PaymentService()
    wrapped = ResilientTool.wrap(payment_tool(service), policy=FLAGGED["create_payment"])
    assert wrapped.invoke({"amount": 1}) == "charged 1: ch_1"
    assert wrapped.invoke({"amount": 2, "idempotency_key": "order-17"}) == "charged 2: ch_2"
    # The developer's key reached the service: the repeat is answered with the first charge.
    assert wrapped.invoke({"amount": 3, "idempotency_key": "order-17"}) == "charged 3: ch_2"
    assert len(service.requests[0] or "") == 32 and service.requests[1:] == ["order-17"] * 2


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_outside_a_graph_the_call_id_tells_a_resend(mode: str) -> None:
    """Invoked directly (no graph: no step, no task), the caller's call id is all that
    tells one call from another: the same id on the same thread is a resend, and gets
    the key it had; another id is another request."""
    service = PaymentService()
    policy = ToolPolicy(idempotency_key=True, dedup="off")  # each call reaches the service
    wrapped = ResilientTool.wrap(payment_tool(service), policy=policy)
    config: RunnableConfig = {"configurable": {"thread_id": "t-direct"}}

    async def send(call_id: str) -> None:
        call = tool_call("create_payment", {"amount": 5}, id=call_id)
        if mode == "sync":
            wrapped.invoke(call, config)
        else:
            await wrapped.ainvoke(call, config)

    await send("c1")
    await send("c1")  # the caller sends it again (e.g. after its own crash)
    await send("c2")
    key = derive_key("t-direct", "create_payment", "c1")
    assert service.requests == [key, key, derive_key("t-direct", "create_payment", "c2")]
    assert service.ledger == [("ch_1", 5), ("ch_2", 5)]


def _call(name: str, policy: ToolPolicy, *, id: str = "c1", thread: str | None = "t") -> Call:
    tool = payment_tool(PaymentService())
    return make_call(name, {"amount": 1}, policy, id=id, tool=tool, thread_id=thread)


def test_derived_key_depends_on_thread_tool_and_call_id() -> None:
    base = derive_key("t", "create_payment", "c1")
    assert base == derive_key("t", "create_payment", "c1")
    others = {
        derive_key("u", "create_payment", "c1"),
        derive_key(None, "create_payment", "c1"),
        derive_key("t", "create_refund", "c1"),
        derive_key("t", "create_payment", "c2"),
    }
    assert base not in others and len(others) == 4
    assert len(base) == 32 and int(base, 16) >= 0
    # In a graph, the call's position in the run is part of the key: two turns differ,
    # a resumed step is the same.
    turn = derive_key("t", "create_payment", "c1", "tools@1")
    assert turn == derive_key("t", "create_payment", "c1", "tools@1")
    assert len({base, turn, derive_key("t", "create_payment", "c1", "tools@5")}) == 3


def test_key_follows_the_position_of_the_call() -> None:
    """`key_for` reads the position off the call's config (`core.resume.position`)."""
    policy = ToolPolicy(idempotency_key=True)

    def at(step: int, task: str, *, checkpointer: bool = True) -> str:
        call = _call("create_payment", policy)
        conf = {"checkpoint_ns": f"tools:{task}", "__pregel_task_id": task}
        if checkpointer:
            conf["__pregel_checkpointer"] = object()
        call.config = {"configurable": conf, "metadata": {"langgraph_step": step}}
        return key_for(call)

    assert at(3, "task-a") == at(3, "task-b")  # a resumed step: its task id may differ
    assert at(3, "task-a") == derive_key("t", "create_payment", "c1", "tools@3")
    assert at(5, "task-a") != at(3, "task-a")  # a later turn
    # A run that cannot be resumed: each graph task is a new request.
    assert at(3, "task-a", checkpointer=False) != at(3, "task-b", checkpointer=False)
    assert key_for(_call("create_payment", policy)) == derive_key("t", "create_payment", "c1")


def test_key_is_built_once_per_call() -> None:
    calls: list[IdempotencyInfo] = []

    def build(info: IdempotencyInfo) -> str:
        calls.append(info)
        return f"k{len(calls)}"

    call = _call("create_payment", ToolPolicy(idempotency_key=build))
    assert key_for(call) == key_for(call) == "k1"
    assert execution_args(call) == {"amount": 1, "idempotency_key": "k1"}
    assert len(calls) == 1


def test_call_without_id_gets_a_random_key() -> None:
    policy = ToolPolicy(idempotency_key=True)
    a, b = _call("create_payment", policy, id=""), _call("create_payment", policy, id="")
    assert key_for(a) != key_for(b)
    assert key_for(a) == key_for(a)


def test_bad_key_builder_is_a_usage_error() -> None:
    call = _call("create_payment", ToolPolicy(idempotency_key=lambda info: ""))
    with pytest.raises(UsageError):
        key_for(call)


def test_tool_without_the_parameter_gets_no_key() -> None:
    call = _call("create_payment", ToolPolicy(idempotency_key=True))
    call.tool = StructuredTool.from_function(
        lambda amount: amount, name="create_payment", description="Pay."
    )
    assert execution_args(call) == {"amount": 1}


def test_flag_makes_a_write_idempotent() -> None:
    resolver = PolicyResolver(policies={"create_payment": ToolPolicy(idempotency_key=True)})
    assert resolver.resolve("create_payment").idempotent is True
    assert resolver.resolve("create_order").idempotent is False
    keyed = ToolPolicy(idempotency_key=lambda info: "k", retry=RetryPolicy(max_attempts=2))
    assert ResolvedPolicy(keyed, "send_email").idempotent is True


def test_flag_contradicting_idempotent_false_is_rejected() -> None:
    with pytest.raises(ValueError, match="contradicts"):
        ToolPolicy(idempotent=False, idempotency_key=True)
    with pytest.raises(ValueError):
        ToolPolicy(idempotency_key="yes please")  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    thread=st.one_of(st.none(), st.text()),
    name=st.text(min_size=1),
    call_id=st.text(),
    position=st.one_of(st.none(), st.text()),
)
def test_the_default_key_is_the_digest_of_its_parts_as_json(
    thread: str | None, name: str, call_id: str, position: str | None
) -> None:
    """The key's text is ``json.dumps`` of its parts, however it is built: keys written
    by an earlier version (journal entries, dedup ledgers) are found again."""
    parts = ["lrt-idem-v1", thread, name, call_id] + ([position] if position is not None else [])
    text = json.dumps(parts)
    expected = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    assert derive_key(thread, name, call_id, position) == expected
