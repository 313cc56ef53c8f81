"""State backends: the operations, and shared state through every adapter (InMemoryStore).

Each `harness.run` builds new adapters: two runs on one store behave like two workers.
The multi-process tests on a real PostgreSQL server are in `test_backends_postgres.py`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import BreakerPolicy, Cache, RetryPolicy, Shared, ToolPolicy
from langchain_resilient_tools.core.errors import UsageError
from langchain_resilient_tools.state.backend import (
    BackendError,
    MemoryBackend,
    StoreBackend,
)
from langchain_resilient_tools.state.choose import as_backend
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import CALLS, counted, failing_tool, ok_tool


def _backends(clock: FakeClock) -> list[Any]:
    return [MemoryBackend(clock=clock), StoreBackend(InMemoryStore(), clock=clock)]


@pytest.mark.parametrize("kind", [0, 1], ids=["memory", "inmemorystore"])
def test_get_put_expire_delete(kind: int) -> None:
    clock = FakeClock()
    backend = _backends(clock)[kind]
    assert backend.get("ns", "k") is None
    backend.put("ns", "k", {"a": [1, 2]}, ttl=10)
    assert backend.get("ns", "k") == {"a": [1, 2]}
    assert backend.get("other", "k") is None
    clock.advance(9.9)
    assert backend.get("ns", "k") == {"a": [1, 2]}
    clock.advance(0.2)
    assert backend.get("ns", "k") is None  # expired
    backend.put("ns", "k", "v", ttl=10)
    backend.delete("ns", "k")
    assert backend.get("ns", "k") is None


@pytest.mark.parametrize("kind", [0, 1], ids=["memory", "inmemorystore"])
def test_claim_once_until_expired_or_deleted(kind: int) -> None:
    clock = FakeClock()
    backend = _backends(clock)[kind]
    assert backend.claim("ns", "k", "first", ttl=5) is True
    assert backend.claim("ns", "k", "second", ttl=5) is False
    assert backend.get("ns", "k") == "first"
    clock.advance(5.1)
    assert backend.claim("ns", "k", "third", ttl=5) is True  # the old claim expired
    backend.delete("ns", "k")
    assert backend.claim("ns", "k", "fourth", ttl=5) is True
    assert backend.get("ns", "k") == "fourth"


def test_store_backend_keeps_messages_intact() -> None:
    backend = StoreBackend(InMemoryStore())
    message = ToolMessage("sunny", tool_call_id="c1", name="get_weather")
    backend.put("results", "k", (message, 12.5), ttl=60)
    value, at = backend.get("results", "k")
    assert isinstance(value, ToolMessage) and value.content == "sunny" and at == 12.5


def test_store_failure_is_a_backend_error() -> None:
    class Broken(InMemoryStore):
        def batch(self, ops: Any) -> Any:
            raise ConnectionError("network partition")

    backend = StoreBackend(Broken())
    with pytest.raises(BackendError) as info:
        backend.get("ns", "k")
    assert isinstance(info.value.__cause__, ConnectionError)


def test_as_backend() -> None:
    assert as_backend(None) is None
    memory = MemoryBackend()
    assert as_backend(memory) is memory
    assert isinstance(as_backend(InMemoryStore()), StoreBackend)
    with pytest.raises(UsageError):
        as_backend({"not": "a store"})


def test_policy_fields_are_validated() -> None:
    assert ToolPolicy().shared.backend == "auto" and ToolPolicy().shared.on_error == "open"
    with pytest.raises(ValueError):
        ToolPolicy(shared=Shared(backend="redis"))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ToolPolicy(shared=Shared(on_error="maybe"))  # type: ignore[arg-type]


# -- through the adapters: two runs (new adapters each) on one graph store ------------

BREAKER = ToolPolicy(
    breaker=BreakerPolicy(failure_threshold=2, recovery_time=30),
    retry=RetryPolicy(max_attempts=1),
    shared=Shared(backend="store"),
)


def _error(result: Any, call_id: str) -> dict[str, Any]:
    message = result[call_id]
    assert message.status == "error"
    data: dict[str, Any] = json.loads(message.content)
    return data


def test_breaker_opened_by_one_worker_stops_the_next(harness: Harness) -> None:
    store = InMemoryStore()
    tools = [failing_tool("get_quote", ConnectionError("down"))]
    calls = [tool_call("get_quote", {"query": q}, id=f"c{q}") for q in ("a", "b")]
    first = harness.run(tools, calls, policy=BREAKER, store=store)
    assert _error(first, "ca")["error"] == "transient_failure"
    assert CALLS["get_quote"] == 2
    second = harness.run(tools, [tool_call("get_quote", {"query": "c"}, id="cc")], policy=BREAKER, store=store)  # fmt: skip
    data = _error(second, "cc")
    assert data["error"] == "circuit_open" and data["retry_after_s"] > 0
    assert CALLS["get_quote"] == 2  # the second worker never touched the service


def test_without_a_shared_store_each_worker_has_its_own_breaker(harness: Harness) -> None:
    tools = [failing_tool("get_quote", ConnectionError("down"))]
    calls = [tool_call("get_quote", {"query": q}, id=f"c{q}") for q in ("a", "b")]
    harness.run(tools, calls, policy=BREAKER)  # a store-less graph: in-process
    second = harness.run(tools, [tool_call("get_quote", {"query": "c"}, id="cc")], policy=BREAKER)
    assert _error(second, "cc")["error"] == "transient_failure"
    assert CALLS["get_quote"] == 3


def test_local_policy_ignores_the_graph_store(harness: Harness) -> None:
    store = InMemoryStore()
    policy = BREAKER.model_copy(update={"shared": Shared(backend="local")})
    tools = [failing_tool("get_quote", ConnectionError("down"))]
    calls = [tool_call("get_quote", {"query": q}, id=f"c{q}") for q in ("a", "b")]
    harness.run(tools, calls, policy=policy, store=store)
    harness.run(tools, [tool_call("get_quote", {"query": "c"}, id="cc")], policy=policy, store=store)  # fmt: skip
    assert CALLS["get_quote"] == 3
    assert list(store.search(("langchain_resilient_tools", "breaker"))) == []


THREAD = {"configurable": {"thread_id": "conversation-1"}}
"""The workers serve one conversation: dedup is scoped by its thread."""


def test_a_booking_repeated_on_another_worker_runs_once(harness: Harness) -> None:
    store = InMemoryStore()
    tools = [counted("book_room", lambda room: f"booked {room}")]
    policy = ToolPolicy(shared=Shared(backend="store"))
    call = tool_call("book_room", {"room": "101"}, id="b1")
    first = harness.run(tools, [call], policy=policy, store=store, config=THREAD)
    assert first["b1"].status == "success" and "booked 101" in str(first["b1"].content)
    again = harness.run(tools, [tool_call("book_room", {"room": "101"}, id="b2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert _error(again, "b2")["error"] == "duplicate_call"
    assert CALLS["book_room"] == 1


def test_a_read_repeated_on_another_worker_is_reused(harness: Harness) -> None:
    store = InMemoryStore()
    tools = [ok_tool("get_weather")]
    policy = ToolPolicy(shared=Shared(backend="store"))
    harness.run(tools, [tool_call("get_weather", {"city": "Oslo"}, id="w1")], policy=policy, store=store, config=THREAD)  # fmt: skip
    again = harness.run(tools, [tool_call("get_weather", {"city": "Oslo"}, id="w2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert again["w2"].status == "success" and "sunny in Oslo" in str(again["w2"].content)
    assert again["w2"].response_metadata["resilience"]["served_by"] == "dedup"
    assert CALLS["get_weather"] == 1


def test_result_cache_is_shared(harness: Harness) -> None:
    store = InMemoryStore()
    tools = [ok_tool("get_weather")]
    policy = ToolPolicy(shared=Shared(backend="store"), cache=Cache(ttl_s=60), dedup="off")
    harness.run(tools, [tool_call("get_weather", {"city": "Rome"}, id="w1")], policy=policy, store=store, config=THREAD)  # fmt: skip
    again = harness.run(tools, [tool_call("get_weather", {"city": "Rome"}, id="w2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert again["w2"].response_metadata["resilience"]["served_by"] == "cache"
    assert CALLS["get_weather"] == 1


def test_stale_cache_is_shared(harness: Harness) -> None:
    store = InMemoryStore()
    policy = ToolPolicy(
        dedup="off",
        retry=RetryPolicy(max_attempts=1),
        shared=Shared(backend="store"),
        cache=Cache(stale_s=600),
    )
    harness.run([ok_tool("get_weather")], [tool_call("get_weather", {"city": "Rome"}, id="w1")], policy=policy, store=store, config=THREAD)  # fmt: skip

    def down_fn(city: str) -> str:
        raise ConnectionError("down")

    down = [counted("get_weather", down_fn)]
    again = harness.run(down, [tool_call("get_weather", {"city": "Rome"}, id="w2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert again["w2"].status == "success" and "sunny in Rome" in str(again["w2"].content)
    assert again["w2"].response_metadata["resilience"]["served_by"] == "stale_cache"


class _Broken(InMemoryStore):
    def batch(self, ops: Any) -> Any:
        raise ConnectionError("partition")

    async def abatch(self, ops: Any) -> Any:
        raise ConnectionError("partition")


@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_store_partition_fails_open_or_closed(harness: Harness, on_error: str) -> None:
    tools = [counted("book_room", lambda room: f"booked {room}")]
    policy = ToolPolicy(
        breaker=BreakerPolicy(failure_threshold=2),
        shared=Shared(backend="store", on_error=on_error),
    )
    result = harness.run(tools, [tool_call("book_room", {"room": "7"}, id="b1")], policy=policy, store=_Broken())  # fmt: skip
    if on_error == "open":
        assert result["b1"].status == "success" and CALLS["book_room"] == 1
    else:
        data = _error(result, "b1")
        assert data["error"] == "transient_failure" and data["retryable"] is True
        assert "state store" in data["message"]
        assert CALLS["book_room"] == 0
