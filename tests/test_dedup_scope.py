"""Two users on one thread, and calls with no thread: a result is served to another call
(dedup, the result cache, the stale fallback) only when that call could have produced it
(DESIGN.md invariant 12).

A team channel's thread: alice and bob take turns on one thread; who asks is in the
run's ``configurable`` and in LangGraph's runtime context, and the tool learns it from a
declared input (a ``config`` parameter, a ``ToolRuntime``, a state field) or reads it
undeclared (``get_config()``). With the default policy a read is deduplicated within its
thread: bob's identical call must run for bob, while alice's repeat is still reused.

With no thread (a graph without a checkpointer, a wrapped tool called directly by a web
handler) nothing tells one caller from another: nothing is shared unless
``Cache(scope="global")``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import (
    Cache,
    Fallback,
    ResilientTool,
    ResilientToolNode,
    RetryPolicy,
    Shared,
    ToolPolicy,
)
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests import _users
from tests._users import ADAPTERS, CURRENT, MODES, SERVICE, Ctx, get_my_orders
from tests.clock import FakeClock
from tests.support.answers import by_id


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    _users.reset()
    yield


TOOLS: dict[str, BaseTool] = {
    "config": _users.get_orders_by_config,
    "context": _users.get_orders_by_context,
    "state_field": _users.get_orders_by_user_field,
    "undeclared": _users.get_orders_undeclared,
    "request": get_my_orders,
}
FEATURES = {
    "dedup": {},  # the default policy: a read is deduplicated within its thread
    "cache": {"cache": {"ttl_s": 600.0}, "dedup": "off"},
    "stale": {
        "fallback": Fallback(stale_s=600.0),
        "dedup": "off",
        "retry": RetryPolicy(max_attempts=1),
    },
}


def _policy(feature: str, *, scope: str | None = None, **extra: Any) -> ToolPolicy:
    options = dict(FEATURES[feature])
    cache = dict(options.pop("cache", {}))
    if scope is not None:
        cache["scope"] = scope
    if cache:
        options["cache"] = Cache(**cache)
    return ToolPolicy(**options, clock=FakeClock(), **extra)


@dataclass
class App:
    """One compiled graph (its own adapter), asked by one user at a time."""

    app: Any
    mode: str
    tool_name: str
    model: ScriptedChatModel | None = None
    threaded: bool = True

    def ask(
        self,
        user: str,
        *,
        thread: str = "team",
        ids: tuple[str, ...] = ("c1",),
        message_id: str | None = None,
    ) -> list[ToolMessage]:
        """`user` asks (one AIMessage of identical calls, `ids`); the answers, in order."""
        CURRENT["user"] = user
        # A web app's user is the request's: the graph's config and context do not say.
        told = self.tool_name != get_my_orders.name
        configurable: dict[str, Any] = {"user_id": user} if told else {}
        context = Ctx(user if told else "web")
        if self.threaded:
            configurable["thread_id"] = f"{SERVICE['test']}-{thread}"
        calls = [tool_call(self.tool_name, {}, id=i) for i in ids]
        ai = AIMessage("", tool_calls=calls, id=message_id)
        payload: dict[str, Any] = {"user": user}
        if self.model is not None:
            self.model.script = [ai, AIMessage("done")]
            self.model._index = 0
            payload["messages"] = [HumanMessage("my orders")]
        else:
            payload["messages"] = [ai]
        config = {"configurable": configurable}
        if self.mode == "sync":
            state = self.app.invoke(payload, config, context=context)
        else:
            state = asyncio.run(self.app.ainvoke(payload, config, context=context))
        answers = by_id(state["messages"])
        return [answers[i] for i in ids]


def _app(
    adapter: str,
    mode: str,
    kind: str,
    policy: ToolPolicy,
    *,
    threaded: bool = True,
    store: Any = None,
    saver: Any = None,
) -> App:
    the_tool = TOOLS[kind]
    saver = saver or (InMemorySaver() if threaded else None)
    app, model = _users.build(adapter, the_tool, policy, saver=saver, store=store)
    return App(app, mode, the_tool.name, model, threaded)


def _served_by(message: ToolMessage) -> str:
    return str(message.response_metadata.get("resilience", {}).get("served_by", "tool"))


def _check_bob(feature: str, bob: ToolMessage) -> None:
    """Bob is never answered with alice's data; with the service up he gets his own."""
    assert "alice" not in str(bob.content), bob
    if feature == "stale":  # the service is down for bob, and no result of his was kept
        assert bob.status == "error"
    else:
        assert bob.content == "orders of bob"
        assert _served_by(bob) == "tool"


# -- one thread, two users -------------------------------------------------------------

SHARED_THREAD_KINDS = ["config", "context", "state_field", "undeclared"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("kind", SHARED_THREAD_KINDS)
def test_two_users_on_one_thread_never_share_a_result(
    kind: str, feature: str, adapter: str, mode: str
) -> None:
    app = _app(adapter, mode, kind, _policy(feature))
    assert app.ask("alice")[0].content == "orders of alice"
    SERVICE["down"] = feature == "stale"
    _check_bob(feature, app.ask("bob", ids=("c2",))[0])
    SERVICE["down"] = False
    again = app.ask("alice", ids=("c3",))[0]  # alice again, on the same thread: hers
    assert str(again.content).endswith("orders of alice")
    if feature != "stale":
        assert _served_by(again) == feature
        assert SERVICE["runs"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("kind", ["context", "undeclared"])
def test_two_workers_sharing_a_store_keep_users_on_one_thread_apart(
    kind: str, adapter: str, mode: str
) -> None:
    """The dedup ledger in a shared store: per thread and per user, on every worker."""
    store = InMemoryStore()
    policy = _policy("dedup", shared=Shared(backend="store"))
    one, two = (_app(adapter, mode, kind, policy, store=store) for _ in range(2))
    assert one.ask("alice")[0].content == "orders of alice"
    bob = two.ask("bob", ids=("c2",))[0]
    assert bob.content == "orders of bob"
    again = two.ask("alice", ids=("c3",))[0]
    assert str(again.content).endswith("orders of alice") and _served_by(again) == "dedup"
    assert SERVICE["runs"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ["node", "middleware"])
@pytest.mark.parametrize("kind", ["context", "undeclared"])
def test_the_ledger_in_graph_state_keeps_users_on_one_thread_apart(
    kind: str, adapter: str, mode: str
) -> None:
    """After a restart (new adapters, the same checkpointer) the thread's ``tool_ledger``
    answers alice's repeat, and never bob's call."""
    saver = InMemorySaver()
    before = _app(adapter, mode, kind, _policy("dedup"), saver=saver)
    assert before.ask("alice")[0].content == "orders of alice"
    after = _app(adapter, mode, kind, _policy("dedup"), saver=saver)  # a restarted worker
    assert after.ask("bob", ids=("c2",))[0].content == "orders of bob"
    again = after.ask("alice", ids=("c3",))[0]
    assert str(again.content).endswith("orders of alice") and _served_by(again) == "dedup"
    assert SERVICE["runs"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("kind", ["config", "undeclared"])
def test_identical_calls_of_one_step_are_still_one_call(kind: str, adapter: str, mode: str) -> None:
    """Twins (identical calls in one AIMessage) run once for their user, per user."""
    app = _app(adapter, mode, kind, _policy("dedup"))
    alice = app.ask("alice", ids=("a1", "a2"))
    ran = [m.content == "orders of alice" for m in alice]  # which runs: the dispatch's
    assert sorted(ran) == [False, True]
    assert all(str(m.content).endswith("orders of alice") for m in alice)
    bob = app.ask("bob", ids=("b1", "b2"))
    assert all(str(m.content).endswith("orders of bob") for m in bob)
    assert SERVICE["runs"] == 2


# -- no thread: nothing is shared unless "global" --------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("feature", ["cache", "stale"])
def test_no_thread_shares_no_kept_result(feature: str, adapter: str, mode: str) -> None:
    """A graph without a checkpointer serving the users of a web app: the user is the
    request's, which the layer cannot see, so a kept result is never served."""
    app = _app(adapter, mode, "request", _policy(feature), threaded=False)
    assert app.ask("alice")[0].content == "orders of alice"
    SERVICE["down"] = feature == "stale"
    _check_bob(feature, app.ask("bob", ids=("c2",))[0])
    SERVICE["down"] = False
    assert app.ask("alice", ids=("c3",))[0].content == "orders of alice"  # ran again
    assert SERVICE["runs"] == 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("kind", ["context", "undeclared"])
def test_no_thread_dedup_keeps_users_apart(kind: str, adapter: str, mode: str) -> None:
    """No thread, one dedup scope (a message id and call ids seen again): bob's identical
    calls run for bob; each step's twins are still one call."""
    app = _app(adapter, mode, kind, _policy("dedup"), threaded=False)
    alice = app.ask("alice", ids=("call_0", "call_1"), message_id="ai-0")
    assert all(str(m.content).endswith("orders of alice") for m in alice)
    bob = app.ask("bob", ids=("call_0", "call_1"), message_id="ai-0")
    assert bob[0].content == "orders of bob" and _served_by(bob[0]) == "tool"
    assert str(bob[1].content).endswith("orders of bob")
    assert SERVICE["runs"] == 2


@pytest.mark.parametrize("mode", MODES)
def test_no_thread_dedup_never_outlives_its_step(mode: str) -> None:
    """A node invoked directly, twice, with an AIMessage without an id and the same call
    ids (a local model numbering its calls): each run is its own step, so bob's calls
    run (the user is the request's: nothing else tells the callers apart)."""
    node = ResilientToolNode([get_my_orders], policy=_policy("dedup"))
    config: Any = {"configurable": {"__pregel_runtime": Runtime()}}  # as a graph gives

    def ask(user: str) -> list[str]:
        CURRENT["user"] = user
        calls = [tool_call(get_my_orders.name, {}, id=i) for i in ("call_0", "call_1")]
        given = {"messages": [AIMessage("", tool_calls=calls)]}
        if mode == "sync":
            out = node.invoke(given, config)
        else:
            out = asyncio.run(node.ainvoke(given, config))
        return [str(m.content) for m in out["messages"]]

    assert [a.endswith("orders of alice") for a in ask("alice")] == [True, True]
    assert [b.endswith("orders of bob") for b in ask("bob")] == [True, True]
    assert SERVICE["runs"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_no_thread_shares_when_told_global(adapter: str, mode: str) -> None:
    """``Cache(scope="global")`` shares across callers with no thread, as asked."""
    app = _app(adapter, mode, "request", _policy("cache", scope="global"), threaded=False)
    app.ask("alice")
    hit = app.ask("alice", ids=("c2",))[0]
    assert _served_by(hit) == "cache" and SERVICE["runs"] == 1


# -- a wrapped tool called outside any graph (a web handler calling it directly) --------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("form", ["tool_call", "args"])
@pytest.mark.parametrize("feature", ["cache", "stale"])
def test_a_wrapped_tool_outside_a_graph_shares_nothing(feature: str, form: str, mode: str) -> None:
    wrapped = ResilientTool.wrap(get_my_orders, policy=_policy(feature))

    def ask(user: str, call_id: str) -> Any:
        CURRENT["user"] = user
        given: Any = tool_call(wrapped.name, {}, id=call_id) if form == "tool_call" else {}
        answer = wrapped.invoke(given) if mode == "sync" else asyncio.run(wrapped.ainvoke(given))
        return answer.content if isinstance(answer, ToolMessage) else answer

    assert ask("alice", "c1") == "orders of alice"
    SERVICE["down"] = feature == "stale"
    bob = ask("bob", "c2")
    assert "alice" not in str(bob)
    if feature == "cache":
        assert bob == "orders of bob"
    SERVICE["down"] = False
    assert ask("alice", "c3") == "orders of alice"
    assert SERVICE["runs"] == 3


@pytest.mark.parametrize("mode", MODES)
def test_a_wrapped_tool_outside_a_graph_shares_when_told_global(mode: str) -> None:
    wrapped = ResilientTool.wrap(get_my_orders, policy=_policy("cache", scope="global"))
    for call_id in ("c1", "c2"):
        call = tool_call(wrapped.name, {}, id=call_id)
        answer = wrapped.invoke(call) if mode == "sync" else asyncio.run(wrapped.ainvoke(call))
    assert _served_by(answer) == "cache" and SERVICE["runs"] == 1
