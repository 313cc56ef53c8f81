"""Dangling tool calls (issue 45, item 8): calls a stopped run left unanswered.

A run stopped between a model message and its calls' answers (interrupted before the
tools, a person's question never answered, a cancelled run, a worker killed: the kills
are in `tests/test_dangling_kills.py`) leaves an ``AIMessage`` whose calls nothing
answers, and a new user message does not run them. The next model call then gets a
history providers refuse. Each test drives real LangGraph graphs with real
checkpointers, sends a new message, and checks what the model was given: a valid
history (`provider_problems`), every call answered from the journal: a receipt's answer,
``unknown_outcome`` for a write that may have run, ``not_run`` for one that did not.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition

from langchain_resilient_tools import (
    ResilientToolNode,
    ResilientToolsMiddleware,
    ResilientToolsState,
    UsageError,
    answer_dangling_calls,
    dangling_calls_node,
)
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.support.answers import by_id as answers


def provider_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """What chat APIs refuse (OpenAI: "An assistant message with 'tool_calls' must be
    followed by tool messages responding to each 'tool_call_id'"; Anthropic: every
    ``tool_use`` needs its ``tool_result`` in the next message): a call of any model
    message not answered by the tool messages right after it."""
    problems = []
    for i, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        ids = {c["id"] for c in [*message.tool_calls, *message.invalid_tool_calls]}
        after: set[str] = set()
        for later in messages[i + 1 :]:
            if not isinstance(later, ToolMessage):
                break
            after.add(later.tool_call_id)
        if ids - after:
            problems.append(f"message {i}: {sorted(ids - after)} not answered right after it")
    return problems


def body(message: ToolMessage) -> dict[str, Any]:
    data = json.loads(str(message.content))
    assert isinstance(data, dict)
    return data


class Outbox:
    """A write that counts its effects, and a read."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.hang = False

    def tools(self) -> list[BaseTool]:
        outbox = self

        @tool
        def send_email(to: str) -> str:
            """Send an email."""
            outbox.started.set()
            if outbox.hang:
                outbox.release.wait(10)
            outbox.sent.append(to)
            return f"sent to {to}"

        @tool
        def get_inbox(folder: str) -> str:
            """Read a folder of the inbox."""
            return f"3 emails in {folder}"

        return [send_email, get_inbox]


TWO_CALLS = AIMessage(
    "",
    tool_calls=[
        tool_call("send_email", {"to": "alice@example.com"}, id="call_0"),
        tool_call("get_inbox", {"folder": "sent"}, id="call_1"),
    ],
)
CONFIG = {"configurable": {"thread_id": "t1"}}


def agent(
    outbox: Outbox, saver: Any, script: Sequence[AIMessage], **kwargs: Any
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script=list(script))
    middleware = [ResilientToolsMiddleware(**kwargs.pop("options", {})), *kwargs.pop("more", [])]
    graph = create_agent(
        model, tools=outbox.tools(), middleware=middleware, checkpointer=saver, **kwargs
    )
    return graph, model


# -- which calls dangle ---------------------------------------------------------------


def test_every_message_with_unanswered_calls_is_found_oldest_first() -> None:
    from langchain_resilient_tools.pipeline.journal.dangling import dangling

    first = AIMessage("", tool_calls=[tool_call("a", id="1"), tool_call("b", id="2")])
    second = AIMessage(
        "",
        tool_calls=[tool_call("c", id="3")],
        invalid_tool_calls=[{"name": "d", "args": "{", "id": "4", "error": "bad"}],
    )
    messages = [
        HumanMessage("hi"), first, ToolMessage("ok", tool_call_id="1"), HumanMessage("and?"),
        second, HumanMessage("again"), AIMessage("no calls"),
    ]  # fmt: skip
    found = dangling(messages)
    assert [(i, [c["id"] for c in calls]) for i, calls in found] == [
        (1, ["2"]),
        (4, ["3", "4"]),
    ]
    assert (
        dangling([first, ToolMessage("", tool_call_id="1"), ToolMessage("", tool_call_id="2")])
        == []
    )


def test_the_steps_looked_at_follow_the_message_and_stop_before_the_next() -> None:
    """A message made at step 3 had its calls run after it: up to `WINDOW` steps on (its
    agent's ``after_model`` nodes), and up to the step after this run's input (a dying
    worker may have lost its last checkpoints), but before the next model message."""
    from langchain_resilient_tools.pipeline.journal.made import WINDOW, _candidates

    made = _candidates(["a", "b"], {"a": (3, 1.0), "b": (6, 2.0)}, 30, "", "tools")
    assert made["a"].steps == ("tools@4", "tools@5")  # "b" was made at step 6
    assert made["b"].steps == tuple(f"tools@{s}" for s in range(7, 32))  # up to input + 1
    assert made["b"].at == 2.0
    late = _candidates(["a"], {"a": (3, 1.0)}, 4, "agent:1|", "tools")
    assert late["a"].steps == tuple(f"agent:1|tools@{s}" for s in range(4, 4 + WINDOW))
    assert _candidates(["gone"], {}, 4, "", "tools") == {}
    given = _candidates(["in", "a"], {"in": None, "a": (3, 1.0)}, 30, "", "tools")
    assert list(given) == ["a"]  # a message that came in as input: no step is known


# -- a run stopped before its tools (no intent): not_run ---------------------------------


def test_calls_of_a_run_stopped_before_the_tools_are_answered_not_run(
    sqlite_saver: SqliteSaver,
) -> None:
    outbox = Outbox()
    graph, _ = agent(outbox, sqlite_saver, [TWO_CALLS], interrupt_before=["tools"])
    graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    assert set(graph.get_state(CONFIG).next) == {"tools"}  # one task per call

    graph, model = agent(outbox, sqlite_saver, [AIMessage("Which folder did you mean?")])
    state = graph.invoke({"messages": [HumanMessage("actually, wait")]}, CONFIG)

    assert outbox.sent == []  # nothing ran, and nothing runs now
    seen = model.seen[0]
    assert provider_problems(seen) == []
    assert [type(m).__name__ for m in seen] == [
        "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "HumanMessage",
    ]  # fmt: skip
    got = answers(seen)
    write, read = body(got["call_0"]), body(got["call_1"])
    assert (write["error"], write["retryable"]) == ("not_run", True)
    assert "was not run for this call" in write["message"]
    assert "nothing was done" in write["message"]
    assert (read["error"], read["retryable"]) == ("not_run", True)
    assert "It only reads" in read["message"]
    assert got["call_0"].status == "error"
    assert got["call_0"].response_metadata["resilience"]["served_by"] == "recovery"
    assert [r["error"] for r in state["tool_errors"]] == ["not_run", "not_run"]
    assert provider_problems(state["messages"]) == []  # the thread stays valid


def test_every_gap_of_the_thread_is_answered_after_its_own_message(
    sqlite_saver: SqliteSaver,
) -> None:
    """Two runs stopped before their tools, the repair off for the second's message:
    providers check the whole history, so both messages' calls are answered, each right
    after its own message, when the repair runs."""
    outbox = Outbox()
    later = AIMessage(
        "", tool_calls=[tool_call("send_email", {"to": "bob@example.com"}, id="call_0")]
    )
    graph, _ = agent(outbox, sqlite_saver, [TWO_CALLS], interrupt_before=["tools"])
    graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    graph, _ = agent(
        outbox, sqlite_saver, [later], interrupt_before=["tools"],
        options={"repair_dangling": False},
    )  # fmt: skip
    graph.invoke({"messages": [HumanMessage("no, bob")]}, CONFIG)

    graph, model = agent(outbox, sqlite_saver, [AIMessage("Nothing was sent.")])
    state = graph.invoke({"messages": [HumanMessage("what happened?")]}, CONFIG)
    seen = model.seen[0]
    assert provider_problems(seen) == []
    assert [(m.type, getattr(m, "tool_call_id", None)) for m in seen] == [
        ("human", None), ("ai", None), ("tool", "call_0"), ("tool", "call_1"),
        ("human", None), ("ai", None), ("tool", "call_0"), ("human", None),
    ]  # fmt: skip
    assert {body(m)["error"] for m in seen if isinstance(m, ToolMessage)} == {"not_run"}
    assert len(state["tool_errors"]) == 3
    assert outbox.sent == []


def test_a_call_answered_not_run_runs_when_the_model_sends_it_again(
    sqlite_saver: SqliteSaver,
) -> None:
    outbox = Outbox()
    graph, _ = agent(outbox, sqlite_saver, [TWO_CALLS], interrupt_before=["tools"])
    graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    again = AIMessage(
        "", tool_calls=[tool_call("send_email", {"to": "alice@example.com"}, id="call_0")]
    )
    graph, _ = agent(outbox, sqlite_saver, [again, AIMessage("Sent.")])
    state = graph.invoke({"messages": [HumanMessage("yes, send it")]}, CONFIG)
    assert outbox.sent == ["alice@example.com"]
    assert state["messages"][-2].content == "sent to alice@example.com"
    assert provider_problems(state["messages"]) == []


def test_a_dangling_call_that_came_in_as_input_is_not_said_not_run(
    sqlite_saver: SqliteSaver,
) -> None:
    """A history brought in (as the input, or with ``update_state``) was not made by this
    graph: nothing tells where its calls ran, so a write's outcome is unknown."""
    outbox = Outbox()
    graph, model = agent(outbox, sqlite_saver, [AIMessage("Let me check.")])
    graph.invoke({"messages": [HumanMessage("email alice"), TWO_CALLS]}, CONFIG)
    got = answers(model.seen[0])
    write = body(got["call_0"])
    assert write["error"] == "unknown_outcome"
    assert "no record tells whether it started" in write["message"]
    assert body(got["call_1"])["error"] == "not_run"
    assert provider_problems(model.seen[0]) == []


def test_the_repair_can_be_turned_off(sqlite_saver: SqliteSaver) -> None:
    outbox = Outbox()
    graph, _ = agent(outbox, sqlite_saver, [TWO_CALLS], interrupt_before=["tools"])
    graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    graph, model = agent(
        outbox, sqlite_saver, [AIMessage("ok")], options={"repair_dangling": False}
    )
    graph.invoke({"messages": [HumanMessage("actually, wait")]}, CONFIG)
    assert provider_problems(model.seen[0]) == [
        "message 1: ['call_0', 'call_1'] not answered right after it"
    ]


def test_repair_dangling_must_be_a_bool() -> None:
    with pytest.raises(UsageError, match="repair_dangling must be True or False"):
        ResilientToolsMiddleware(repair_dangling="no")  # type: ignore[arg-type]


def test_a_question_to_a_person_never_answered_composes_with_langchains_middleware(
    sqlite_saver: SqliteSaver,
) -> None:
    """LangChain's `HumanInTheLoopMiddleware` asks before the write; the user sends a new
    message instead of an answer: the write never started."""
    outbox = Outbox()
    hitl = HumanInTheLoopMiddleware(interrupt_on={"send_email": True})
    graph, _ = agent(outbox, sqlite_saver, [TWO_CALLS], more=[hitl])
    graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    assert graph.get_state(CONFIG).interrupts

    graph, model = agent(outbox, sqlite_saver, [AIMessage("ok")], more=[hitl])
    graph.invoke({"messages": [HumanMessage("never mind")]}, CONFIG)
    assert provider_problems(model.seen[0]) == []
    assert body(answers(model.seen[0])["call_0"])["error"] == "not_run"
    assert outbox.sent == []


# -- a run cut short during a write (intent, no receipt): unknown_outcome ------------------


def test_a_write_cancelled_mid_call_is_answered_unknown_outcome() -> None:
    """An async run cancelled while its write runs (a client went away): the journal
    marks the intent orphaned; the next message's run answers ``unknown_outcome``, with
    the same hint the pipeline gives, and never runs the write again."""
    outbox = Outbox()
    outbox.hang = True
    saver = InMemorySaver()
    graph, _ = agent(outbox, saver, [TWO_CALLS, AIMessage("done")])

    async def cancelled_then_new_message() -> tuple[dict[str, Any], ScriptedChatModel]:
        run = asyncio.ensure_future(
            graph.ainvoke({"messages": [HumanMessage("email alice")]}, CONFIG)
        )
        while not outbox.started.is_set():
            await asyncio.sleep(0.001)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        again, model = agent(outbox, saver, [AIMessage("I will check first.")])
        state = await again.ainvoke({"messages": [HumanMessage("did it go?")]}, CONFIG)
        return state, model

    try:
        state, model = asyncio.run(cancelled_then_new_message())
    finally:
        outbox.release.set()
    seen = model.seen[0]
    assert provider_problems(seen) == []
    write = body(answers(seen)["call_0"])
    assert write["error"] == "unknown_outcome"
    assert write["retryable"] is False
    assert "stopped before it confirmed the result" in write["message"]
    assert write["suggestion"].startswith("Do not repeat this call blindly")
    assert answers(seen)["call_0"].response_metadata["resilience"]["served_by"] == "journal"
    assert body(answers(seen)["call_1"])["error"] == "not_run"
    assert [r["error"] for r in state["tool_errors"]] == ["unknown_outcome", "not_run"]
    assert len(outbox.sent) <= 1  # the hung send may finish on its thread; never twice


# -- hand-built graphs: the node, and the function ------------------------------------


class Crash(BaseException):
    """Stands for the process dying (a BaseException: nothing answers it)."""


def hand_built(
    tools: Sequence[BaseTool], saver: Any, script: Sequence[AIMessage], *, dies: bool = False
) -> Any:
    """model -> tools -> model, with `dangling_calls_node` where a run starts; `dies`:
    the process dies (`Crash`) once the tools answered, before their answers are saved."""
    model = ScriptedChatModel(script=list(script))
    node = ResilientToolNode(tools)

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def run_tools(state: dict[str, Any], config: RunnableConfig) -> Any:
        update = node.invoke(state, config)
        if dies:
            raise Crash()
        return update

    builder = StateGraph(ResilientToolsState)
    builder.add_node("repair", dangling_calls_node(node))
    builder.add_node("model", call_model)
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "repair")
    builder.add_edge("repair", "model")
    builder.add_conditional_edges("model", tools_condition, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver), model


def test_a_hand_built_graph_answers_a_finished_write_from_its_receipt(
    sqlite_saver: SqliteSaver,
) -> None:
    outbox = Outbox()
    graph, _ = hand_built(outbox.tools(), sqlite_saver, [TWO_CALLS], dies=True)
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    assert outbox.sent == ["alice@example.com"]

    graph, model = hand_built(outbox.tools(), sqlite_saver, [AIMessage("Sent.")])
    state = graph.invoke({"messages": [HumanMessage("did it go?")]}, CONFIG)

    assert outbox.sent == ["alice@example.com"]  # not run again
    seen = model.seen[0]
    assert provider_problems(seen) == []
    write = answers(seen)["call_0"]
    assert write.status == "success"
    assert write.content == (
        "[This call already ran before the run was resumed; this is the answer it gave "
        "then. It was not run again.]\nsent to alice@example.com"
    )
    assert write.response_metadata["resilience"]["served_by"] == "journal"
    assert body(answers(seen)["call_1"])["error"] == "not_run"  # a read: safe to send again
    assert [r["error"] for r in state["tool_errors"]] == ["not_run"]


def test_a_hand_built_graph_answers_a_write_cut_short_unknown_outcome(
    sqlite_saver: SqliteSaver,
) -> None:
    outbox = Outbox()
    send, read = outbox.tools()

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        send.invoke({"to": to})
        raise Crash()  # the process dies after the effect, before the answer

    graph, _ = hand_built([send_email, read], sqlite_saver, [TWO_CALLS])
    with pytest.raises(Crash):
        graph.invoke({"messages": [HumanMessage("email alice")]}, CONFIG)
    graph, model = hand_built([send_email, read], sqlite_saver, [AIMessage("Checking.")])
    graph.invoke({"messages": [HumanMessage("did it go?")]}, CONFIG)

    assert outbox.sent == ["alice@example.com"]
    seen = model.seen[0]
    assert provider_problems(seen) == []
    write = body(answers(seen)["call_0"])
    assert write["error"] == "unknown_outcome"
    assert "get_inbox" not in write["suggestion"]  # no read whose parameters the write fills


def test_the_function_answers_a_thread_without_a_journal() -> None:
    """Outside a graph (a history kept elsewhere): no journal can tell, so a write's
    outcome is unknown and a read was not run; answered messages are left alone."""
    outbox = Outbox()
    node = ResilientToolNode(outbox.tools())
    messages = [HumanMessage("email alice"), TWO_CALLS, ToolMessage("3", tool_call_id="call_1")]
    got = answer_dangling_calls(messages, tools=node)
    assert [m.tool_call_id for m in got] == ["call_0"]
    write = body(got[0])
    assert write["error"] == "unknown_outcome"
    assert "no record tells whether it started" in write["message"]
    assert got[0].response_metadata["resilience"]["served_by"] == "recovery"
    state = {"messages": [HumanMessage("hi"), TWO_CALLS]}
    assert [body(m)["error"] for m in answer_dangling_calls(state, tools=node)] == [
        "unknown_outcome",
        "not_run",
    ]
    assert answer_dangling_calls([HumanMessage("hi")], tools=node) == []
    with pytest.raises(TypeError, match="ResilientToolNode or a ResilientToolsMiddleware"):
        answer_dangling_calls(messages, tools=object())  # type: ignore[arg-type]


# -- what each journal entry means (`pipeline.journal.recover`), on a backend of its own --


class Entries:
    """A node whose journal is a `MemoryBackend` (its ``store=``), and entries put there
    under the keys the journal stage uses."""

    def __init__(self, **policy: Any) -> None:
        from langchain_resilient_tools import ToolPolicy
        from langchain_resilient_tools.state.backend import MemoryBackend

        self.backend = MemoryBackend()
        self.node = ResilientToolNode(
            Outbox().tools(), policy=ToolPolicy(**policy), store=self.backend
        )
        self.args = {"to": "alice@example.com"}

    def call(self, name: str = "send_email") -> Any:
        tool = self.node.tools_by_name[name]
        return self.node.pipeline.new_call(
            call_id="call_0", name=name, args=dict(self.args), tool=tool, thread_id="t1"
        )

    def put(self, step: str, entry: dict[str, Any], *, rerun: bool = False) -> None:
        from langchain_resilient_tools.core.idempotency import key_for_call
        from langchain_resilient_tools.pipeline.journal import logic

        call = self.call()
        key = logic.entry_key(call.name, key_for_call(call, "call_0", step), step, rerun=rerun)
        self.backend.put(logic.NS_JOURNAL, key, entry, ttl=3600)

    def intent(self, step: str, owner: dict[str, Any], lease: float) -> dict[str, Any]:
        from langchain_resilient_tools.pipeline.journal import logic

        now = self.backend.clock()
        return logic.intent(
            "send_email", self.args, owner=owner, now=now - 5, lease=lease, step=step
        )

    def settle(
        self,
        steps: Sequence[str] | None = ("tools@4", "tools@5"),
        since: float | None = 0.0,
        name: str = "send_email",
    ) -> Any:
        made = self.backend.clock() - 60 if since == 0.0 else since
        return self.node.pipeline.settle_unanswered(self.call(name), steps, made)


ELSEWHERE = {"host": "another-host", "boot": "b", "pid": 1, "start": "1"}


def test_a_receipt_at_any_candidate_step_answers_with_what_the_model_got() -> None:
    from langchain_resilient_tools.pipeline.journal import logic

    j = Entries()
    receipt = logic.receipt(j.intent("tools@5", ELSEWHERE, 10), now=j.backend.clock(), value="sent")
    j.put("tools@5", receipt)
    outcome = j.settle()
    assert outcome.failure is None and outcome.value == "sent"
    assert outcome.call.record.served_by == "journal"
    assert j.settle(steps=("tools@4",)).failure.error == "not_run"  # not where it ran


def test_a_recorded_failure_is_answered_again_and_a_persons_rerun_wins() -> None:
    from langchain_resilient_tools.core.errors import OrphanedWrite
    from langchain_resilient_tools.pipeline.journal import logic

    j = Entries()
    call = j.call()
    failed = logic.receipt(
        j.intent("tools@4", ELSEWHERE, 10), now=j.backend.clock(),
        failure=j.node.pipeline._failure(OrphanedWrite(seconds_ago=3), call),
    )  # fmt: skip
    j.put("tools@4", failed)
    assert j.settle().failure.error == "unknown_outcome"
    rerun = logic.receipt(j.intent("tools@4", ELSEWHERE, 10), now=j.backend.clock(), value="sent")
    j.put("tools@4", rerun, rerun=True)
    assert j.settle().value == "sent"


def test_an_intent_is_unknown_outcome_never_still_running_for_a_gone_worker() -> None:
    j = Entries()
    j.put("tools@4", j.intent("tools@4", ELSEWHERE, lease=1))  # its lease ran out
    gone = j.settle().failure
    assert gone.error == "unknown_outcome" and "stopped before it confirmed" in gone.message
    j.put("tools@4", j.intent("tools@4", ELSEWHERE, lease=600))  # another worker runs it
    alive = j.settle().failure
    assert alive.error == "unknown_outcome" and "still being run" in alive.message


def test_nothing_found_is_not_run_only_where_an_entry_would_be() -> None:
    from langchain_resilient_tools.state.backend import MemoryBackend

    assert Entries().settle().failure.error == "not_run"
    assert Entries().settle(steps=None).failure.error == "unknown_outcome"  # steps not known
    assert Entries().settle(since=None).failure.error == "unknown_outcome"  # age not known
    old = Entries(journal={"ttl_s": 30}).settle()  # made 60 s ago: its entry may be gone
    assert old.failure.error == "unknown_outcome"
    assert Entries(journal=False).settle().failure.error == "unknown_outcome"
    assert Entries().settle(steps=()).failure.error == "not_run"  # it could run nowhere
    assert Entries().settle(name="get_inbox").failure.error == "not_run"

    class Down(MemoryBackend):
        def get(self, ns: str, key: str) -> Any:
            from langchain_resilient_tools.core.errors import BackendError

            raise BackendError("down")

    j = Entries()
    j.node.pipeline.env.backend = Down()
    assert j.settle().failure.error == "unknown_outcome"  # the journal could not be read


def test_a_malformed_dangling_call_is_answered_not_run() -> None:
    node = ResilientToolNode(Outbox().tools())
    bad = AIMessage(
        "", invalid_tool_calls=[{"name": "send_email", "args": "{to:", "id": "b1", "error": "x"}]
    )
    (answer,) = answer_dangling_calls([HumanMessage("hi"), bad], tools=node)
    assert (answer.tool_call_id, body(answer)["error"]) == ("b1", "not_run")
