"""Ambiguous writes a person decides: ``ToolPolicy(unknown_outcome="interrupt")``.

Through `ResilientToolNode` and `ResilientToolsMiddleware` (``create_agent``), sync and
async, in compiled graphs with LangGraph's in-memory checkpointer. A fake order service
records each write under the call's idempotency key; a sibling write and a read count
their runs, so every test checks that nothing ran twice without a person choosing so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langchain_resilient_tools import (
    HumanDecision,
    ResilientTool,
    ToolPolicy,
    UnknownOutcome,
    UsageError,
    VerifyInfo,
)
from langchain_resilient_tools.core.review import parse_decision
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.answers import by_id
from tests.test_verify import OrderService, order_tool

ASK = ToolPolicy(unknown_outcome="interrupt")


@pytest.fixture
def h(graph_harness: Harness) -> Harness:
    return graph_harness


class Counters:
    """A sibling write and a read that count their runs."""

    def __init__(self) -> None:
        self.emails: list[str] = []
        self.reads: list[str] = []

        @tool
        def send_email(to: str) -> str:
            """Send an email."""
            self.emails.append(to)
            return f"sent to {to}"

        @tool
        def get_weather(city: str) -> str:
            """Today's weather."""
            self.reads.append(city)
            return f"sunny in {city}"

        self.tools: list[BaseTool] = [send_email, get_weather]


def step(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=list(calls))


ORDER = tool_call("create_order", {"item": "tea"}, id="c1")
EMAIL = tool_call("send_email", {"to": "ann@example.com"}, id="c2")
READ = tool_call("get_weather", {"city": "Oslo"}, id="c3")
CONFIG = {"configurable": {"thread_id": "t1"}}


class Run:
    """One graph and thread: start it, then answer each question it asks."""

    def __init__(
        self, h: Harness, tools: list[BaseTool], ai: AIMessage, tool: str = "create_order",
        verify: Any = None,
    ) -> None:  # fmt: skip
        self.h, self.tools, self.ai = h, tools, ai
        ask = UnknownOutcome(verify=verify, action="interrupt")
        self.policies = {tool: ToolPolicy(unknown_outcome=ask)}
        self.saver = InMemorySaver()
        self.graph = self.build()
        self.out = self._invoke(self._start())

    def build(self, *, resumed: bool = False) -> Any:
        """The graph; `resumed`: again, as a new process resuming the thread builds it
        (new adapters, and a model whose next answer is the last)."""
        script = [AIMessage("done")] if resumed else [self.ai, AIMessage("done")]
        return self.h.build(
            self.tools, policies=self.policies, checkpointer=self.saver, script=script
        )

    def _start(self) -> Any:
        return (
            {"messages": [self.ai]} if self.h.adapter == "node" else {"messages": [("user", "go")]}
        )

    def _invoke(self, payload: Any) -> Any:
        return self.h.invoke(self.graph, payload, CONFIG)

    @property
    def questions(self) -> list[Any]:
        return list(self.out.get("__interrupt__", ()))

    def answer(self, decisions: Mapping[str, Any]) -> Any:
        """Resume every pending question with the decision for its tool call id."""
        pending = self.questions
        assert pending, "no question pending"
        resume = {q.id: decisions[q.value["tool_call_id"]] for q in pending}
        self.out = self._invoke(Command(resume=resume))
        return self.out

    def message(self, call_id: str) -> ToolMessage:
        found = [
            m
            for m in self.out["messages"]
            if isinstance(m, ToolMessage) and m.tool_call_id == call_id
        ]
        assert len(found) == 1, found
        assert not [k for k in found[0].response_metadata if k.startswith("lrt_")]  # private
        return found[0]


def body(message: ToolMessage) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(str(message.content))
    return data


# -- verify first ------------------------------------------------------------------


def test_verify_finds_the_write_and_no_one_is_asked(h: Harness) -> None:
    service = OrderService("after")
    run = Run(h, [order_tool(service)], step(ORDER), verify=service.lookup)
    assert run.questions == []
    assert "order o-1 for tea" in str(run.message("c1").content)
    assert len(service.keys) == 1  # no second write


def test_verify_finds_none_runs_once_more_and_no_one_is_asked(h: Harness) -> None:
    service = OrderService("before")
    run = Run(h, [order_tool(service)], step(ORDER), verify=service.lookup)
    assert run.questions == []
    assert run.message("c1").status == "success"
    assert len(service.keys) == 2 and service.keys[0] == service.keys[1]


def test_verify_fails_then_a_person_is_asked(h: Harness) -> None:
    service = OrderService("after")

    def broken(info: VerifyInfo) -> str | None:
        raise RuntimeError("orders index unavailable")

    run = Run(h, [order_tool(service)], step(ORDER), verify=broken)
    (question,) = run.questions
    review = question.value
    assert review["kind"] == "unknown_outcome"
    assert review["tool"] == "create_order" and review["tool_call_id"] == "c1"
    assert review["args"] == {"item": "tea"}
    assert review["idempotency_key"] == service.keys[0]  # the key the write was sent with
    assert "lost contact" in review["what_happened"]
    assert review["seconds_ago"] >= 0 and review["failed_at"] > 0
    assert set(review["choices"]) == {"run_again", "done", "give_up"}
    assert review["problem"] is None
    assert len(service.keys) == 1
    assert all(m.tool_call_id != "c1" for m in run.out["messages"] if isinstance(m, ToolMessage))


# -- each choice ----------------------------------------------------------------------


def test_run_again_writes_exactly_once_more_with_the_same_key(h: Harness) -> None:
    service, others = OrderService("after"), Counters()
    run = Run(h, [order_tool(service), *others.tools], step(ORDER, EMAIL, READ))
    assert len(run.questions) == 1
    run.answer({"c1": {"choice": "run_again"}})
    assert run.questions == []
    answer = run.message("c1")
    assert answer.status == "success"
    assert "chose to run it again" in str(answer.content)
    assert "order o-2 for tea" in str(answer.content)
    assert len(service.keys) == 2 and service.keys[0] == service.keys[1]
    # The siblings answered once, before the question, and were not run again on resume.
    assert others.emails == ["ann@example.com"] and others.reads == ["Oslo"]
    assert run.message("c2").content == "sent to ann@example.com"
    assert run.message("c3").content == "sunny in Oslo"


def test_done_answers_with_the_persons_result_and_writes_nothing(h: Harness) -> None:
    service, others = OrderService("after"), Counters()
    run = Run(h, [order_tool(service), *others.tools], step(ORDER, EMAIL))
    run.answer({"c1": HumanDecision(choice="done", result="order o-1 for tea")})
    answer = run.message("c1")
    assert answer.status == "success"
    assert "confirmed that it took effect" in str(answer.content)
    assert "order o-1 for tea" in str(answer.content)
    assert answer.response_metadata["resilience"]["served_by"] == "person"
    assert "tool_error" not in answer.response_metadata
    assert len(service.keys) == 1 and others.emails == ["ann@example.com"]
    assert [r["tool_call_id"] for r in run.out.get("tool_errors", [])] == []


def test_give_up_tells_the_model_and_writes_nothing(h: Harness) -> None:
    service = OrderService("after")
    run = Run(h, [order_tool(service)], step(ORDER))
    run.answer({"c1": {"choice": "give_up", "note": "the shop will check by phone"}})
    answer = run.message("c1")
    assert answer.status == "error"
    data = body(answer)
    assert data["error"] == "unknown_outcome" and data["decided_by"] == "person"
    assert data["retryable"] is False
    assert "chose not to run it again" in data["message"]
    assert "the shop will check by phone" in data["message"]
    (record,) = run.out["tool_errors"]
    assert record["tool_call_id"] == "c1" and record["decided_by"] == "person"
    assert len(service.keys) == 1


def test_an_answer_that_is_not_a_decision_is_refused_or_asked_again(h: Harness) -> None:
    """A resume value the review's schema does not admit is refused by LangGraph before
    it is saved (the question stays, and can be answered again); one the schema admits
    but that does not make sense ("done" without its result) is asked again."""
    from langgraph.errors import is_invalid_resume
    from pydantic import ValidationError

    service = OrderService("after")
    run = Run(h, [order_tool(service)], step(ORDER))
    with pytest.raises(ValidationError) as refused:
        run.answer({"c1": "maybe"})
    assert is_invalid_resume(refused.value)
    (question,) = run.questions  # still pending: nothing was saved
    run.answer({"c1": {"choice": "done"}})  # "done" without the result
    (question,) = run.questions
    assert "'result'" in question.value["problem"]
    run.answer({"c1": "run_again"})
    assert run.questions == []
    assert len(service.keys) == 2


def test_the_review_is_a_langchain_tool_approval(h: Harness) -> None:
    """#45: the question speaks LangChain's per-call approval shape (its five keys of
    ``ToolApprovalRequest``, and a ``response_schema`` of approve/respond/reject), so one
    approval UI serves it; each LangChain decision means what it means there."""
    service = OrderService("after", "after", "after")
    calls = [tool_call("create_order", {"item": i}, id=f"a{i}") for i in ("tea", "jam", "oat")]
    run = Run(h, [order_tool(service)], step(*calls))
    seen: list[str] = []
    decisions = {
        "atea": {"type": "approve"},
        "ajam": {"type": "respond", "message": "order o-9 for jam"},
        "aoat": {"type": "reject", "message": "the shop is closed"},
    }
    while run.questions:
        for q in run.questions:
            value = q.value
            assert value["type"] == "tool_approval" and value["name"] == "create_order"
            assert {"tool_call_id", "args", "description"} <= set(value)
            assert "Approve" in value["description"]
            schema = str(q.response_schema)
            assert all(t in schema for t in ("approve", "respond", "reject"))
            assert "edit" not in schema  # another argument list would be another call
            seen.append(value["tool_call_id"])
        run.answer(decisions)
    assert sorted(seen) == ["ajam", "aoat", "atea"]
    assert run.message("atea").status == "success"  # approved: sent once more
    assert body(run.message("aoat"))["decided_by"] == "person"
    assert "o-9" in str(run.message("ajam").content)
    assert len(service.keys) == 4  # three first runs, and one more for the approved one


# -- several questions, and resumes that run nothing twice -----------------------------


def test_two_unknown_writes_in_one_step_each_decided_once(h: Harness) -> None:
    service = OrderService("after", "after")
    other = tool_call("create_order", {"item": "cake"}, id="c4")
    run = Run(h, [order_tool(service)], step(ORDER, other))
    decisions = {"c1": "run_again", "c4": "give_up"}
    asked = 0
    while run.questions:
        asked += len(run.questions)
        run.answer(decisions)
    assert asked == 2
    assert run.message("c1").status == "success"
    assert body(run.message("c4"))["decided_by"] == "person"
    # Two first runs, and one more for c1 only: never a run the person did not choose.
    assert len(service.keys) == 3
    assert sorted(service.keys.count(k) for k in set(service.keys)) == [1, 2]


def test_a_resume_in_a_new_process_runs_nothing_again(h: Harness) -> None:
    """Answers live in the checkpointer, not in the adapter: new adapters resume."""
    service, others = OrderService("after"), Counters()
    run = Run(h, [order_tool(service), *others.tools], step(ORDER, EMAIL))
    run.graph = run.build(resumed=True)  # a restart: new node/middleware, same checkpointer
    run.answer({"c1": "give_up"})
    assert len(service.keys) == 1 and others.emails == ["ann@example.com"]
    assert run.message("c2").content == "sent to ann@example.com"


def test_a_read_never_asks(h: Harness) -> None:
    others = Counters()

    @tool
    def lookup_stock(item: str) -> str:
        """Stock of an item."""
        raise ConnectionError("connection reset by peer")

    ai = step(tool_call("lookup_stock", {"item": "tea"}, id="c1"))
    run = Run(h, [lookup_stock, *others.tools], ai, tool="lookup_stock")
    assert run.questions == []
    assert body(run.message("c1"))["error"] != "unknown_outcome"


# -- without a checkpointer, and where it does not apply ---------------------------------


def test_without_a_checkpointer_it_fails_at_first_use(h: Harness) -> None:
    service = OrderService()
    script = [step(ORDER), AIMessage("done")]
    graph = h.build([order_tool(service)], policies={"create_order": ASK}, script=script)
    payload = {"messages": [step(ORDER)]} if h.adapter == "node" else {"messages": [("user", "go")]}
    with pytest.raises(UsageError, match="checkpointer"):
        h.invoke(graph, payload)
    assert service.keys == []  # refused before anything ran


def test_other_tools_of_the_node_are_untouched(h: Harness) -> None:
    """Only steps with a write that may ask run as tasks; the rest run as before."""
    others = Counters()
    service = OrderService()
    run = Run(h, [order_tool(service), *others.tools], step(EMAIL, READ))
    assert run.questions == []
    assert run.message("c2").content == "sent to ann@example.com"
    assert run.message("c3").content == "sunny in Oslo"


def test_the_wrapper_refuses_interrupt_at_construction() -> None:
    with pytest.raises(UsageError, match="ResilientToolNode"):
        ResilientTool.wrap(order_tool(OrderService()), policy=ASK)


def test_parse_decision() -> None:
    assert parse_decision("give_up") == HumanDecision(choice="give_up")
    assert parse_decision({"choice": "done", "result": {"id": 1}}) == HumanDecision(
        choice="done", result={"id": 1}
    )
    assert isinstance(parse_decision(3), str)
    assert "choices" in str(parse_decision({"choice": "later"}))
    assert "extra" in str(parse_decision({"choice": "give_up", "why": "x"})).lower()


def test_one_approval_loop_answers_langchains_approvals_and_ours() -> None:
    """#45: in one `create_agent`, LangChain's per-call approval of ``send_email`` and our
    question about an order whose outcome is unknown arrive in one shape, and one loop
    (the approval UI) answers both with LangChain's decisions."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_resilient_tools import ResilientToolsMiddleware
    from langchain_resilient_tools.testing import ScriptedChatModel

    service, counters = OrderService("after"), Counters()
    email = tool_call("send_email", {"to": "ann@example.com"}, id="e1")
    agent = create_agent(
        ScriptedChatModel(script=[step(ORDER, email), AIMessage("done")]),
        tools=[order_tool(service), *counters.tools],
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={"send_email": {"allowed_decisions": ["approve", "reject"]}},
                interrupt_mode="per_call",
            ),
            ResilientToolsMiddleware(policies={"create_order": ASK}),
        ],
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke({"messages": [("user", "go")]}, CONFIG)
    rendered: list[tuple[str, str]] = []
    while out.get("__interrupt__"):
        resume = {}
        for q in out["__interrupt__"]:
            value = q.value  # what the UI renders: one shape
            assert value["type"] == "tool_approval"
            assert "approve" in str(q.response_schema)
            rendered.append((value["name"], value["tool_call_id"]))
            resume[q.id] = {"type": "approve"}
        out = agent.invoke(Command(resume=resume), CONFIG)
    assert sorted(rendered) == [("create_order", "c1"), ("send_email", "e1")]
    assert counters.emails == ["ann@example.com"]
    assert len(service.keys) == 2  # the order was approved: sent once more, same key
    answers = by_id(out["messages"])
    assert answers["c1"].status == "success" and answers["e1"].status == "success"
