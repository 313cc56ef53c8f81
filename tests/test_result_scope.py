"""A kept result (result cache, stale fallback) reaches only a caller who could have
produced it: one user never reads another user's data.

Two users, alice and bob, each on their own thread, call a read tool that learns who
the user is from something the model never sees: the graph state, the run's config,
LangGraph's runtime context, a store read keyed by the config, or a plain injected
argument. Each case runs through every adapter, sync and async, in one process and on
two workers (two adapters) sharing one store (InMemoryStore here, PostgreSQL below).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import (
    Cache,
    CacheKeyInfo,
    Fallback,
    ResilientTool,
    RetryPolicy,
    Shared,
    ToolPolicy,
)
from langchain_resilient_tools.testing import tool_call
from tests import _users
from tests._users import ADAPTERS, MODES, SERVICE, Ctx, get_orders_by_arg
from tests.clock import FakeClock


@pytest.fixture(autouse=True)
def _service() -> Iterator[None]:
    """Each test its own thread ids (a database outlives a test)."""
    _users.reset()
    yield


GRAPH_TOOLS: dict[str, BaseTool] = {
    "state": _users.get_orders_by_state,
    "state_field": _users.get_orders_by_user_field,
    "config": _users.get_orders_by_config,
    "context": _users.get_orders_by_context,
    "store": _users.get_orders_by_store,
}
FEATURES = {
    "cache": {"ttl_s": 600.0},
    "stale": {"stale_s": 600.0},
    "both": {"ttl_s": 600.0, "stale_s": 600.0},
}


def _policy(feature: str, **cache: Any) -> ToolPolicy:
    options = dict(FEATURES[feature])
    stale = options.pop("stale_s", None)  # the stale fallback's, the rest the cache's
    return ToolPolicy(
        cache=Cache(**options, **cache),
        fallback=Fallback(stale_s=stale),
        idempotent=True,
        dedup="off",
        retry=RetryPolicy(max_attempts=1),
        clock=FakeClock(),
        shared=Shared(backend="store"),
    )


@dataclass
class Worker:
    """One worker's compiled graph: its own adapter, the shared store."""

    app: Any
    mode: str

    def ask(
        self,
        user: str,
        *,
        thread: str | None = None,
        call_id: str = "c1",
        args: dict[str, Any] | None = None,
    ) -> ToolMessage:
        thread = f"{SERVICE['test']}-{thread or user}"
        config: dict[str, Any] = {"configurable": {"thread_id": thread}}
        config["configurable"]["user_id"] = user
        ai = AIMessage("", tool_calls=[tool_call(self.tool_name, args or {}, id=call_id)])
        payload: dict[str, Any] = {"user": user}
        payload["messages"] = [HumanMessage("my orders")] if self.agent else [ai]
        if self.agent:
            self.model.script = [ai, AIMessage("done")]
            self.model._index = 0
        kwargs = {"context": Ctx(user)}
        if self.mode == "sync":
            state = self.app.invoke(payload, config, **kwargs)
        else:
            state = asyncio.run(self.app.ainvoke(payload, config, **kwargs))
        answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        found = [m for m in answers if m.tool_call_id == call_id]
        assert len(found) == 1, answers
        return found[-1]

    tool_name: str = ""
    agent: bool = False
    model: Any = None


def _worker(adapter: str, mode: str, kind: str, policy: ToolPolicy, store: BaseStore) -> Worker:
    the_tool = GRAPH_TOOLS[kind]
    app, model = _users.build(adapter, the_tool, policy, saver=InMemorySaver(), store=store)
    return Worker(app, mode, tool_name=the_tool.name, agent=model is not None, model=model)


def _store() -> InMemoryStore:
    store = InMemoryStore()
    for user in ("alice", "bob"):
        store.put(("users",), user, {"name": user})
    return store


def _check_bob(feature: str, bob: ToolMessage) -> None:
    """Bob is never answered with alice's data; with the service up he gets his own."""
    assert "alice" not in str(bob.content)
    if feature == "cache":
        assert bob.content == "orders of bob"
    else:  # the service is down for bob, and no result of his was ever kept
        assert bob.status == "error"


def _alice_then_bob(feature: str, alice_worker: Worker, bob_worker: Worker) -> None:
    first = alice_worker.ask("alice")
    assert first.content == "orders of alice"
    SERVICE["down"] = feature != "cache"
    _check_bob(feature, bob_worker.ask("bob"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("kind", list(GRAPH_TOOLS))
def test_one_user_never_reads_another_users_result(
    kind: str, feature: str, adapter: str, mode: str
) -> None:
    store = _store()
    worker = _worker(adapter, mode, kind, _policy(feature), store)
    _alice_then_bob(feature, worker, worker)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("kind", list(GRAPH_TOOLS))
def test_two_workers_sharing_a_store_keep_users_apart(
    kind: str, feature: str, adapter: str, mode: str
) -> None:
    store = _store()
    policy = _policy(feature)
    one, two = (_worker(adapter, mode, kind, policy, store) for _ in range(2))
    _alice_then_bob(feature, one, two)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("kind", ["state_field", "config"])
def test_declared_inputs_keep_users_apart_even_when_shared_globally(
    kind: str, adapter: str, mode: str
) -> None:
    """With ``Cache(scope="global")`` the declared input (a state field, the config) is in
    the key: bob never gets alice's result, even on alice's thread id, and alice is
    served hers on another thread."""
    store = _store()
    worker = _worker(adapter, mode, kind, _policy("both", scope="global"), store)
    assert worker.ask("alice", thread="shared").content == "orders of alice"
    assert worker.ask("bob", thread="shared", call_id="c2").content == "orders of bob"
    again = worker.ask("alice", thread="another", call_id="c3")
    assert again.content.endswith("orders of alice")  # shared across threads: a hit
    assert again.response_metadata["resilience"]["served_by"] == "cache"
    assert SERVICE["runs"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("kind", ["state", "context"])
def test_a_tool_reading_the_whole_state_or_runtime_shares_nothing_across_threads(
    kind: str, adapter: str, mode: str
) -> None:
    """The whole state (and a `ToolRuntime`, which carries it) differs between threads:
    even ``"global"`` finds no other thread's result (narrow it with ``Cache.key``)."""
    worker = _worker(adapter, mode, kind, _policy("cache", scope="global"), _store())
    worker.ask("alice", thread="a1")
    assert worker.ask("alice", thread="a2", call_id="c2").content == "orders of alice"
    assert SERVICE["runs"] == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_same_user_on_the_same_thread_is_served_from_the_cache(adapter: str, mode: str) -> None:
    """The cache still works within its scope (so the tests above can fail)."""
    worker = _worker(adapter, mode, "context", _policy("cache"), _store())
    worker.ask("alice")
    hit = worker.ask("alice", call_id="c2")
    assert hit.content.endswith("orders of alice")
    assert hit.response_metadata["resilience"]["served_by"] == "cache"
    assert SERVICE["runs"] == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_stale_fallback_serves_the_same_user(adapter: str, mode: str) -> None:
    worker = _worker(adapter, mode, "config", _policy("stale"), _store())
    worker.ask("alice")
    SERVICE["down"] = True
    stale = worker.ask("alice", call_id="c2")
    assert stale.status == "success" and stale.content.endswith("orders of alice")
    assert stale.response_metadata["resilience"]["served_by"] == "stale_cache"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_pure_tool_shares_across_threads_only_when_told(adapter: str, mode: str) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        SERVICE["runs"] += 1
        return f"sunny in {city}"

    def ask(worker: Any, thread: str, call_id: str) -> ToolMessage:
        return worker.ask("anyone", thread=thread, call_id=call_id, args={"city": "Oslo"})

    GRAPH_TOOLS["weather"] = get_weather
    try:
        for scope, runs in (("thread", 2), ("global", 1)):
            SERVICE["runs"] = 0
            worker = _worker(adapter, mode, "weather", _policy("cache", scope=scope), _store())
            ask(worker, "t1", "c1")
            second = ask(worker, "t2", "c2")
            assert str(second.content).endswith("sunny in Oslo")
            assert SERVICE["runs"] == runs, scope
    finally:
        del GRAPH_TOOLS["weather"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_key_function_shares_per_user_across_threads(adapter: str, mode: str) -> None:
    seen: list[CacheKeyInfo] = []

    def per_user(info: CacheKeyInfo) -> Any:
        seen.append(info)
        return (dict(info.args), info.context.user)

    policy = _policy("cache", scope="global", key=per_user)
    worker = _worker(adapter, mode, "context", policy, _store())
    worker.ask("alice", thread="a1")
    hit = worker.ask("alice", thread="a2", call_id="c2")
    assert hit.response_metadata["resilience"]["served_by"] == "cache"
    assert worker.ask("bob", thread="a1", call_id="c3").content == "orders of bob"
    assert SERVICE["runs"] == 2
    assert seen and seen[0].tool_name == "get_orders_by_context"
    assert seen[0].configurable.get("user_id") == "alice"
    assert "checkpoint_ns" not in seen[0].configurable


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_failing_key_function_shares_nothing(adapter: str, mode: str) -> None:
    def broken(info: CacheKeyInfo) -> Any:
        raise RuntimeError("no user")

    policy = _policy("both", scope="global", key=broken)
    worker = _worker(adapter, mode, "context", policy, _store())
    worker.ask("alice")
    assert worker.ask("alice", call_id="c2").content == "orders of alice"
    SERVICE["down"] = True
    assert worker.ask("alice", call_id="c3").status == "error"  # nothing stale was kept
    assert SERVICE["runs"] == 3


# -- a plain InjectedToolArg: ToolNode strips those, so it reaches a wrapped tool called
# -- directly with a tool call (how a developer injects one).


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scope", ["thread", "global"])
@pytest.mark.parametrize("feature", list(FEATURES))
def test_an_injected_argument_is_in_the_key(feature: str, scope: str, mode: str) -> None:
    wrapped = ResilientTool.wrap(get_orders_by_arg, policy=_policy(feature, scope=scope))
    # "thread" shares only within a thread (a call with none shares nothing)
    config: Any = {"configurable": {"thread_id": "t1"}} if scope == "thread" else None

    def ask(user: str, call_id: str) -> Any:
        call = tool_call("get_orders_by_arg", {"user_id": user}, id=call_id)
        if mode == "sync":
            return wrapped.invoke(call, config)
        return asyncio.run(wrapped.ainvoke(call, config))

    assert ask("alice", "c1").content == "orders of alice"
    SERVICE["down"] = feature != "cache"
    _check_bob(feature, ask("bob", "c2"))
    SERVICE["down"] = False
    again = ask("alice", "c3")
    assert again.content.endswith("orders of alice")
    if feature != "stale":
        assert again.response_metadata["resilience"]["served_by"] == "cache"


def test_kept_values_are_digests_never_the_inputs_in_clear() -> None:
    store = _store()
    worker = _worker("node", "sync", "config", _policy("cache"), store)
    worker.ask("alice")
    keys = [item.key for ns in store.list_namespaces() for item in store.search(ns)]
    cached = [k for k in keys if k.startswith("get_orders_by_config:")]
    assert cached and all("alice" not in k for k in cached)
    assert any(ns[-1] == "results-thread" for ns in store.list_namespaces())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_dedup_never_reaches_past_a_thread(adapter: str, mode: str) -> None:
    """Dedup reuses an identical call's result within its thread only, also across
    workers sharing a store: bob's identical call runs and gets his own answer."""
    policy = ToolPolicy(idempotent=True, clock=FakeClock(), shared=Shared(backend="store"))
    store = _store()
    one, two = (_worker(adapter, mode, "context", policy, store) for _ in range(2))
    assert one.ask("alice").content == "orders of alice"
    assert two.ask("bob").content == "orders of bob"
    again = two.ask("alice", call_id="c2")  # alice again, on her thread: reused
    assert again.content.endswith("orders of alice")
    assert again.response_metadata["resilience"]["served_by"] == "dedup"
    assert SERVICE["runs"] == 2


# -- two workers on PostgreSQL: each its own PostgresStore connection to one database.


@pytest.fixture(scope="module")
def pg_users(pg_url: str) -> None:
    """Alice and bob in the store at `pg_url` (what the tools read besides the model's
    arguments)."""
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(pg_url) as store:
        for user in ("alice", "bob"):
            store.put(("users",), user, {"name": user})


@pytest.mark.slow  # PostgreSQL: CI runs it on one Python
@pytest.mark.usefixtures("pg_users")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("kind", list(GRAPH_TOOLS))
def test_two_workers_on_postgres_keep_users_apart(
    pg_url: str, kind: str, feature: str, adapter: str, mode: str
) -> None:
    from langgraph.store.postgres import PostgresStore

    policy = _policy(feature)
    with (
        PostgresStore.from_conn_string(pg_url) as first,
        PostgresStore.from_conn_string(pg_url) as second,
    ):
        one = _worker(adapter, mode, kind, policy, first)
        two = _worker(adapter, mode, kind, policy, second)
        _alice_then_bob(feature, one, two)
        SERVICE["down"] = False
        again = two.ask("alice", call_id="c9")  # alice on the other worker: her own result
        assert again.content.endswith("orders of alice")
