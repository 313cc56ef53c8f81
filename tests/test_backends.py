"""State backends: the operations, and shared state through every adapter.

Each case runs on every backend that is fast to reach: in-process (`MemoryBackend`),
LangGraph's `InMemoryStore`, and Redis (a throwaway server, `tests.redis_server`: on it,
time passes for the server's keys, `pass_time`, since expiry is the server's). Each
`harness.run` builds new adapters: two runs on one store behave like two workers; the
adapter cases run on an `InMemoryStore` and on ``langgraph-checkpoint-redis``'s
`RedisStore` as the graph's store. The multi-process tests on real servers are in
`test_backends_workers.py`, `test_backends_postgres.py` and `test_backends_redis.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from langchain_core.messages import ToolMessage
from langgraph.store.base import Item
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import (
    BreakerPolicy,
    Cache,
    Fallback,
    RetryPolicy,
    Shared,
    ToolPolicy,
)
from langchain_resilient_tools.core.errors import UsageError
from langchain_resilient_tools.state.backend import (
    NAMESPACE,
    BackendError,
    MemoryBackend,
    StoreBackend,
)
from langchain_resilient_tools.state.choose import as_backend
from langchain_resilient_tools.state.inmemory import InMemoryStoreBackend
from langchain_resilient_tools.state.redis import RedisBackend
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.redis_server import pass_time
from tests.support.answers import error_of
from tests.tools import CALLS, counted, failing_tool, ok_tool


@dataclass
class Timed:
    """A backend, and how to make time pass for what it keeps."""

    backend: Any
    advance: Callable[[float], None]


@pytest.fixture(params=["memory", "inmemorystore", "inmemorystore_in_place", "redis"])
def timed(request: pytest.FixtureRequest) -> Timed:
    clock = FakeClock()
    if request.param == "memory":
        return Timed(MemoryBackend(clock=clock), clock.advance)
    if request.param == "inmemorystore":
        return Timed(StoreBackend(InMemoryStore(), clock=clock), clock.advance)
    if request.param == "inmemorystore_in_place":  # what as_backend gives for one
        backend = as_backend(InMemoryStore(), clock=clock)
        assert type(backend) is InMemoryStoreBackend
        return Timed(backend, clock.advance)
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    request.addfinalizer(client.close)
    return Timed(RedisBackend(client), lambda s: pass_time(client, s))


def test_get_put_expire_delete(timed: Timed) -> None:
    backend, advance = timed.backend, timed.advance
    assert backend.get("ns", "k") is None
    backend.put("ns", "k", {"a": [1, 2]}, ttl=10)
    assert backend.get("ns", "k") == {"a": [1, 2]}
    assert backend.get("other", "k") is None
    advance(9.9)
    assert backend.get("ns", "k") == {"a": [1, 2]}
    advance(0.2)
    assert backend.get("ns", "k") is None  # expired
    backend.put("ns", "k", "v", ttl=10)
    backend.delete("ns", "k")
    assert backend.get("ns", "k") is None


def test_claim_once_until_expired_or_deleted(timed: Timed) -> None:
    backend, advance = timed.backend, timed.advance
    assert backend.claim("ns", "k", "first", ttl=5) is True
    assert backend.claim("ns", "k", "second", ttl=5) is False
    assert backend.get("ns", "k") == "first"
    advance(5.1)
    assert backend.claim("ns", "k", "third", ttl=5) is True  # the old claim expired
    backend.delete("ns", "k")
    assert backend.claim("ns", "k", "fourth", ttl=5) is True
    assert backend.get("ns", "k") == "fourth"


def test_messages_are_kept_intact(timed: Timed) -> None:
    backend = timed.backend
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


def test_redis_failure_is_a_backend_error() -> None:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from tests.support.net import free_port

    # Nobody listens there; redis-py's own retries (seconds of backoff by default) off.
    client = redis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0))
    backend = RedisBackend(client)
    for op in (
        lambda: backend.get("ns", "k"),
        lambda: backend.claim("ns", "k", 1, ttl=5),
        lambda: backend.take_token("k", rate=1, burst=1),
    ):
        with pytest.raises(BackendError) as info:
            op()
        assert isinstance(info.value.__cause__, redis.ConnectionError)
    assert backend.clock() > 0  # the clock does not fail: the operations do


def test_an_in_memory_store_read_in_place_holds_what_its_own_api_reads() -> None:
    """`InMemoryStoreBackend` writes the store's own items: its ``get`` and ``search``
    read them, and the backend reads what the store's ``put`` wrote. A subclass of the
    store, or one with a search index, goes through the store's API."""
    store = InMemoryStore()
    backend = as_backend(store)
    assert type(backend) is InMemoryStoreBackend
    backend.put("ns", "k", {"a": 1}, ttl=60)
    item = store.get((NAMESPACE, "ns"), "k")
    assert item is not None and item.key == "k" and item.namespace == (NAMESPACE, "ns")
    assert [i.key for i in store.search((NAMESPACE, "ns"))] == ["k"]
    store.put((NAMESPACE, "ns"), "other", dict(item.value))
    assert backend.get("ns", "other") == {"a": 1}
    assert not backend.claim("ns", "other", {"a": 2}, ttl=60)
    backend.delete("ns", "k")
    assert store.get((NAMESPACE, "ns"), "k") is None and backend.get("ns", "k") is None

    class Counted(InMemoryStore):
        pass

    assert type(as_backend(Counted())) is StoreBackend
    indexed = InMemoryStore(index={"dims": 2, "embed": lambda texts: [[0.0, 1.0] for _ in texts]})
    assert type(as_backend(indexed)) is StoreBackend


def test_an_in_memory_store_whose_items_have_other_fields_goes_through_its_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`InMemoryStoreBackend` sets every field of the items it writes: a LangGraph whose
    `Item` has other fields gets the store's own API, and items it reads whole."""
    store = InMemoryStore()
    monkeypatch.setattr(Item, "__slots__", (*Item.__slots__, "extra"))
    backend = as_backend(store)
    assert type(backend) is StoreBackend
    backend.put("ns", "k", {"a": 1}, ttl=60)
    assert backend.get("ns", "k") == {"a": 1}
    monkeypatch.undo()
    assert type(as_backend(store)) is InMemoryStoreBackend


def test_as_backend() -> None:
    assert as_backend(None) is None
    memory = MemoryBackend()
    assert as_backend(memory) is memory
    assert isinstance(as_backend(InMemoryStore()), StoreBackend)
    with pytest.raises(UsageError, match="redis-py client"):
        as_backend({"not": "a store"})


def test_as_backend_recognizes_redis_clients_and_stores(redis_url: str) -> None:
    """A redis-py client (sync or async) and ``langgraph-checkpoint-redis``'s stores and
    savers get a `RedisBackend` on their client, not durable unless said so. (The store
    and saver are only made: their own operations need Redis's search and JSON modules,
    which Debian's redis-server lacks; ours need none.)"""
    import redis.asyncio
    from langgraph.checkpoint.redis import RedisSaver
    from langgraph.store.redis import AsyncRedisStore, RedisStore

    from langchain_resilient_tools.state.choose import checkpointer_backend, is_durable, kept_in

    client = redis.Redis.from_url(redis_url)
    port = client.connection_pool.connection_kwargs["port"]
    backend = as_backend(client)
    assert isinstance(backend, RedisBackend) and backend.client is client
    assert not is_durable(backend) and kept_in(backend) == f"Redis at 127.0.0.1:{port} (db 0)"
    on_store = as_backend(RedisStore(client))
    assert isinstance(on_store, RedisBackend) and on_store.client is client
    on_saver = checkpointer_backend(RedisSaver(redis_client=client))
    assert isinstance(on_saver, RedisBackend) and on_saver.client is client
    # An async client: a sync client of our own to the same server.
    aclient = redis.asyncio.Redis.from_url(redis_url)
    on_async = as_backend(aclient)
    assert isinstance(on_async, RedisBackend) and isinstance(on_async.client, redis.Redis)
    assert on_async.claim("ns", "k", "from async", ttl=5) and backend.get("ns", "k") == "from async"
    # AsyncRedisStore cannot be made with redisvl 0.28 (it hands its async client to a
    # sync SearchIndex): recognized from its class, with the client it would keep.
    astore = AsyncRedisStore.__new__(AsyncRedisStore)
    astore._redis, astore._task = aclient, None
    on_astore = as_backend(astore)
    assert isinstance(on_astore, RedisBackend) and on_astore.get("ns", "k") == "from async"
    durable = RedisBackend(client, durable=True)
    assert as_backend(durable) is durable and is_durable(durable) and kept_in(durable) is None
    client.close()


def test_the_sync_client_of_an_async_one_keeps_its_settings() -> None:
    import redis.asyncio

    from langchain_resilient_tools.state.redis import sync_client

    theirs = redis.asyncio.Redis(host="cache.internal", port=6380, db=2, password="s3cret", socket_timeout=3)  # fmt: skip
    ours = sync_client(theirs)
    kwargs = ours.connection_pool.connection_kwargs
    assert isinstance(ours, redis.Redis)
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("cache.internal", 6380, 2)
    assert (kwargs["password"], kwargs["socket_timeout"]) == ("s3cret", 3)
    backend = RedisBackend(theirs)
    assert backend.where == "Redis at cache.internal:6380 (db 2)" and "s3cret" not in repr(backend)
    tls = sync_client(redis.asyncio.Redis.from_url("rediss://cache.internal:6390/1"))
    assert isinstance(tls.connection_pool.connection_class(), redis.SSLConnection)
    unix = sync_client(redis.asyncio.Redis.from_url("unix:///run/redis.sock?db=3"))
    assert unix.connection_pool.connection_kwargs["path"] == "/run/redis.sock"
    assert RedisBackend(unix).where == "Redis at /run/redis.sock (db 3)"


def test_policy_fields_are_validated() -> None:
    assert ToolPolicy().shared.backend == "auto" and ToolPolicy().shared.on_error == "open"
    with pytest.raises(ValueError):
        ToolPolicy(shared=Shared(backend="redis"))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ToolPolicy(shared=Shared(on_error="maybe"))  # type: ignore[arg-type]


# -- through the adapters: two runs (new adapters each) on one graph store ------------


@pytest.fixture(params=["inmemorystore", "redisstore"])
def graph_store(request: pytest.FixtureRequest) -> Any:
    """The graph's store the workers share: an `InMemoryStore`, or
    ``langgraph-checkpoint-redis``'s `RedisStore` on a real server (the package keeps
    its state through the store's client; the store's own operations, which need Redis's
    search module, are never called)."""
    if request.param == "inmemorystore":
        return InMemoryStore()
    from langgraph.store.redis import RedisStore

    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))

    def kept_there() -> None:  # the workers' state went through the Redis server
        assert client.keys("langchain_resilient_tools:*"), "nothing was kept in Redis"
        client.close()

    request.addfinalizer(kept_there)
    return RedisStore(client)


BREAKER = ToolPolicy(
    breaker=BreakerPolicy(failure_threshold=2, recovery_time=30),
    retry=RetryPolicy(max_attempts=1),
    shared=Shared(backend="store"),
)


def test_breaker_opened_by_one_worker_stops_the_next(harness: Harness, graph_store: Any) -> None:
    store = graph_store
    tools = [failing_tool("get_quote", ConnectionError("down"))]
    calls = [tool_call("get_quote", {"query": q}, id=f"c{q}") for q in ("a", "b")]
    first = harness.run(tools, calls, policy=BREAKER, store=store)
    assert error_of(first, "ca")["error"] == "transient_failure"
    assert CALLS["get_quote"] == 2
    second = harness.run(tools, [tool_call("get_quote", {"query": "c"}, id="cc")], policy=BREAKER, store=store)  # fmt: skip
    data = error_of(second, "cc")
    assert data["error"] == "circuit_open" and data["retry_after_s"] > 0
    assert CALLS["get_quote"] == 2  # the second worker never touched the service


def test_without_a_shared_store_each_worker_has_its_own_breaker(harness: Harness) -> None:
    tools = [failing_tool("get_quote", ConnectionError("down"))]
    calls = [tool_call("get_quote", {"query": q}, id=f"c{q}") for q in ("a", "b")]
    harness.run(tools, calls, policy=BREAKER)  # a store-less graph: in-process
    second = harness.run(tools, [tool_call("get_quote", {"query": "c"}, id="cc")], policy=BREAKER)
    assert error_of(second, "cc")["error"] == "transient_failure"
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


def test_a_booking_repeated_on_another_worker_runs_once(harness: Harness, graph_store: Any) -> None:
    store = graph_store
    tools = [counted("book_room", lambda room: f"booked {room}")]
    policy = ToolPolicy(shared=Shared(backend="store"))
    call = tool_call("book_room", {"room": "101"}, id="b1")
    first = harness.run(tools, [call], policy=policy, store=store, config=THREAD)
    assert first["b1"].status == "success" and "booked 101" in str(first["b1"].content)
    again = harness.run(tools, [tool_call("book_room", {"room": "101"}, id="b2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert error_of(again, "b2")["error"] == "duplicate_call"
    assert CALLS["book_room"] == 1


def test_a_read_repeated_on_another_worker_is_reused(harness: Harness, graph_store: Any) -> None:
    store = graph_store
    tools = [ok_tool("get_weather")]
    policy = ToolPolicy(shared=Shared(backend="store"))
    harness.run(tools, [tool_call("get_weather", {"city": "Oslo"}, id="w1")], policy=policy, store=store, config=THREAD)  # fmt: skip
    again = harness.run(tools, [tool_call("get_weather", {"city": "Oslo"}, id="w2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert again["w2"].status == "success" and "sunny in Oslo" in str(again["w2"].content)
    assert again["w2"].response_metadata["resilience"]["served_by"] == "dedup"
    assert CALLS["get_weather"] == 1


def test_result_cache_is_shared(harness: Harness, graph_store: Any) -> None:
    store = graph_store
    tools = [ok_tool("get_weather")]
    policy = ToolPolicy(shared=Shared(backend="store"), cache=Cache(ttl_s=60), dedup="off")
    harness.run(tools, [tool_call("get_weather", {"city": "Rome"}, id="w1")], policy=policy, store=store, config=THREAD)  # fmt: skip
    again = harness.run(tools, [tool_call("get_weather", {"city": "Rome"}, id="w2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert again["w2"].response_metadata["resilience"]["served_by"] == "cache"
    assert CALLS["get_weather"] == 1


def test_stale_cache_is_shared(harness: Harness, graph_store: Any) -> None:
    store = graph_store
    policy = ToolPolicy(
        dedup="off",
        retry=RetryPolicy(max_attempts=1),
        shared=Shared(backend="store"),
        fallback=Fallback(stale_s=600),
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
        data = error_of(result, "b1")
        assert data["error"] == "transient_failure" and data["retryable"] is True
        assert "state store" in data["message"]
        assert CALLS["book_room"] == 0
