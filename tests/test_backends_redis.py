"""Shared state on a real Redis server: what is Redis's own.

The server is a throwaway ``redis-server`` (`tests.redis_server`): one per test session,
emptied for each test (`redis_url`); a test that kills a server starts its own. These
tests skip, with the reason, only when it cannot start. The operations every backend
shares are checked in `test_backends.py` (Redis is one of its parameters), the worker
processes of a graph in `test_backends_workers.py`; here: claims under contention, expiry
and the clock on the server, limits, a server killed mid-run, and where the write
journal keeps its records when Redis is all it is given.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.redis import RedisStore
from redis.backoff import NoBackoff
from redis.retry import Retry

from langchain_resilient_tools import BreakerPolicy, Shared, ToolPolicy
from langchain_resilient_tools.pipeline.journal import where
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL
from langchain_resilient_tools.state import redis as redis_state
from langchain_resilient_tools.state.limits import supports_limits
from langchain_resilient_tools.state.redis import RedisBackend
from langchain_resilient_tools.testing import tool_call
from tests import _redis_workers, redis_server
from tests.conftest import Harness
from tests.test_journal import Outbox, Pending, _entries, send_tool
from tests.tools import CALLS, counted

THREAD = {"configurable": {"thread_id": "conversation-1"}}


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url) as c:
        yield c


@pytest.fixture
def backend(client: redis.Redis) -> RedisBackend:
    return RedisBackend(client)


@pytest.fixture
def own_server() -> Iterator[redis_server.Server]:
    """A server of this test's own (it is killed)."""
    server = redis_server.start()
    if isinstance(server, str):
        pytest.skip(f"no Redis server: {server}")
    yield server
    server.stop()


def _spawn(target: Any, *args: Any) -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    process.start()
    return process


def _gather(out: Any, procs: list[Any]) -> list[Any]:
    found = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return found


# -- claims -------------------------------------------------------------------------------


def test_claims_are_exactly_once_under_thread_contention(
    client: redis.Redis, redis_url: str
) -> None:
    """Eight threads on two workers' backends (two clients) claim the same keys at once:
    each key has exactly one winner."""
    keys = [f"k{i}" for i in range(100)]
    other = redis.Redis.from_url(redis_url)
    workers = [RedisBackend(client), RedisBackend(other)]
    start = threading.Barrier(8)
    wins: list[list[str]] = [[] for _ in range(8)]

    def race(i: int) -> None:
        backend = workers[i % 2]
        start.wait(30)
        wins[i] = [k for k in keys if backend.claim("race", k, i, ttl=60)]

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    other.close()
    won = [k for w in wins for k in w]
    assert sorted(won) == sorted(keys)  # every key won once, none twice


@pytest.mark.slow
def test_claims_are_exactly_once_across_processes(redis_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    out, barrier = ctx.Queue(), ctx.Barrier(4)
    keys = [f"k{i}" for i in range(300)]
    procs = [_spawn(_redis_workers.claim, redis_url, keys, barrier, out) for _ in range(4)]
    wins = _gather(out, procs)
    won = [k for w in wins for k in w]
    assert sorted(won) == sorted(keys)  # every key won once, none twice


# -- expiry and the clock are the server's ------------------------------------------------


def test_expiry_is_set_on_the_server(backend: RedisBackend, client: redis.Redis) -> None:
    backend.put("ns", "k", {"a": 1}, ttl=10)
    assert 9_000 < client.pttl("langchain_resilient_tools:ns:k") <= 10_000
    assert backend.claim("ns", "c", "x", ttl=2.5)
    assert 2_000 < client.pttl("langchain_resilient_tools:ns:c") <= 2_500
    backend.put("ns", "z", "x", ttl=0)  # already expired: Redis's shortest TTL, 1 ms
    assert client.pttl("langchain_resilient_tools:ns:z") <= 1
    # The value as `encode` writes it: any worker (any version of this package) reads it.
    assert set(json.loads(client.get("langchain_resilient_tools:ns:k") or b"{}")) == {"t", "d"}


def test_a_prefix_keeps_deployments_apart(client: redis.Redis) -> None:
    staging, prod = RedisBackend(client, prefix="staging"), RedisBackend(client)
    assert staging.claim("dedup", "k", 1, ttl=5) and prod.claim("dedup", "k", 2, ttl=5)
    assert (staging.get("dedup", "k"), prod.get("dedup", "k")) == (1, 2)
    assert client.exists("staging:dedup:k", "langchain_resilient_tools:dedup:k") == 2


@pytest.mark.slow
def test_a_short_ttl_expires_for_real(backend: RedisBackend) -> None:
    backend.put("ns", "k", "v", ttl=0.05)
    assert backend.claim("ns", "c", "v", ttl=0.05)
    time.sleep(0.3)  # a real TTL, only here: the server's keys must expire for real
    assert backend.get("ns", "k") is None
    assert backend.claim("ns", "c", "again", ttl=5) and backend.get("ns", "c") == "again"


def test_a_worker_with_a_wrong_clock_reads_the_servers(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The breaker's and the ledger's times come from `clock`: a worker whose own clock
    is 1000 s off still reads the server's time (the offset is measured on first use)."""
    real = time.time
    monkeypatch.setattr(redis_state.time, "time", lambda: real() + 1000.0)
    backend = RedisBackend(client)
    seconds, micros = client.time()
    server = seconds + micros / 1e6
    assert abs(backend.clock() - server) < 100 and abs(backend.now() - server) < 100


# -- limits (state.limits.LimitBackend) ---------------------------------------------------


def test_a_token_bucket_starts_full_then_says_how_long_to_wait(backend: RedisBackend) -> None:
    assert supports_limits(backend)
    assert [backend.take_token("api", rate=1.0, burst=3) for _ in range(3)] == [0.0] * 3
    wait = backend.take_token("api", rate=1.0, burst=3)
    assert 0.0 < wait <= 1.0  # a token per second: at most a second away
    assert backend.take_token("api", rate=1.0, burst=3) > 0.0  # nothing was taken
    assert backend.take_token("other", rate=1.0, burst=1) == 0.0  # buckets are apart


def test_a_bucket_expires_once_it_would_be_full(backend: RedisBackend, client: redis.Redis) -> None:
    backend.take_token("api", rate=2.0, burst=4)
    # Full again after burst / rate = 2 s: then nothing is lost by forgetting it.
    assert 0 < client.pttl("langchain_resilient_tools:bucket:api") <= 3_000


def test_leases_hold_a_cap(backend: RedisBackend, client: redis.Redis) -> None:
    take = backend.acquire_lease
    assert take("db", cap=2, holder="a", ttl=30) and take("db", cap=2, holder="b", ttl=30)
    assert not take("db", cap=2, holder="c", ttl=30)  # both slots held
    assert take("db", cap=2, holder="a", ttl=30)  # a holder takes no second slot
    assert not take("db", cap=2, holder="c", ttl=30)
    backend.release_lease("db", holder="a")
    assert take("db", cap=2, holder="c", ttl=30)
    assert backend.renew_lease("db", holder="b", ttl=60)
    assert not backend.renew_lease("db", holder="a", ttl=60)  # released: nothing to renew
    backend.release_lease("db", holder="nobody")  # nothing happens
    assert 59_000 < client.pttl("langchain_resilient_tools:lease:db") <= 61_000


@pytest.mark.slow
def test_a_bucket_refills_and_leases_expire_for_real(backend: RedisBackend) -> None:
    assert backend.take_token("api", rate=20.0, burst=1) == 0.0
    wait = backend.take_token("api", rate=20.0, burst=1)
    assert wait > 0.0
    time.sleep(wait + 0.01)
    assert backend.take_token("api", rate=20.0, burst=1) == 0.0
    assert backend.acquire_lease("db", cap=1, holder="a", ttl=0.1)
    time.sleep(0.3)
    assert not backend.renew_lease("db", holder="a", ttl=5)  # it expired
    assert backend.acquire_lease("db", cap=1, holder="b", ttl=5)


@pytest.mark.slow
def test_a_token_bucket_holds_its_rate_across_four_processes(
    redis_url: str, backend: RedisBackend
) -> None:
    """Four workers take from one bucket as fast as it lets them for 2 s of the server's
    time: together they take at most burst + rate x (the time they took over)."""
    rate, burst = 20.0, 5.0
    ctx = multiprocessing.get_context("spawn")
    out, barrier = ctx.Queue(), ctx.Barrier(4)
    procs = [
        _spawn(_redis_workers.take, redis_url, "shared", rate, burst, 2.0, barrier, out)
        for _ in range(4)
    ]
    taken = [t for each in _gather(out, procs) for t in each]
    first, last = min(b for b, _ in taken), max(a for _, a in taken)
    assert len(taken) <= burst + rate * (last - first) + 1e-6
    assert len(taken) >= burst + 5  # it refilled: the bucket was not just emptied once


@pytest.mark.slow
def test_a_lease_of_a_killed_worker_expires(redis_url: str, backend: RedisBackend) -> None:
    ttl = 3.0
    out = multiprocessing.get_context("spawn").Queue()
    holder = _spawn(_redis_workers.hold, redis_url, "db", ttl, out)
    held_from = out.get(timeout=180)
    os.kill(holder.pid or 0, signal.SIGKILL)
    holder.join(30)
    assert holder.exitcode == -signal.SIGKILL
    tried_at = backend.now()
    if tried_at < held_from + ttl:  # (always, unless this machine stalled for 3 s)
        assert not backend.acquire_lease("db", cap=1, holder="me", ttl=30)
    deadline = time.monotonic() + 60
    while not backend.acquire_lease("db", cap=1, holder="me", ttl=30):
        assert time.monotonic() < deadline, "the dead worker's lease never expired"
        time.sleep(0.1)
    assert backend.now() > held_from + ttl  # not before its lease ran out


# -- a server killed mid-run: Shared.on_error ---------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("on_error", ["open", "closed"])
def test_a_server_killed_mid_run_fails_open_or_closed(
    harness: Harness, own_server: redis_server.Server, on_error: str
) -> None:
    # redis-py's own retries off (by default it backs off for seconds per operation).
    client = redis.Redis(port=own_server.port, retry=Retry(NoBackoff(), 0))
    store = RedisStore(client)  # the graph's store, shared through its client
    policy = ToolPolicy(
        breaker=BreakerPolicy(failure_threshold=2),
        shared=Shared(backend="store", on_error=on_error),
    )
    tools = [counted("book_room", lambda room: f"booked {room}")]
    first = harness.run(tools, [tool_call("book_room", {"room": "1"}, id="b1")], policy=policy, store=store, config=THREAD)  # fmt: skip
    assert first["b1"].status == "success" and client.keys("langchain_resilient_tools:dedup:*")
    own_server.kill()
    second = harness.run(tools, [tool_call("book_room", {"room": "2"}, id="b2")], policy=policy, store=store, config=THREAD)  # fmt: skip
    client.close()
    if on_error == "open":
        assert second["b2"].status == "success" and CALLS["book_room"] == 2
    else:
        data = json.loads(str(second["b2"].content))
        assert data["error"] == "transient_failure" and "state store" in data["message"]
        assert CALLS["book_room"] == 1  # not run while the shared state is unreachable


# -- the write journal when Redis is all it is given --------------------------------------


class OnAdapterStore(Pending):
    """`Pending` with the adapters' own ``store=`` (not the graph's)."""

    def __init__(self, *args: Any, adapter_store: Any, **kwargs: Any) -> None:
        self.adapter_store = adapter_store
        super().__init__(*args, **kwargs)

    def build(self) -> Any:
        return self.harness.build(
            self.tools, policy=self.policy, checkpointer=self.saver, ai=self.ai,
            store=self.store, interrupt_before=["tools"], adapter_store=self.adapter_store,
        )  # fmt: skip


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Any:
    """The journal's one-time warnings of this test (none said before it)."""
    monkeypatch.setattr(where, "_warned", set())
    caplog.set_level(logging.WARNING, logger=where.__name__)
    return lambda: [r.getMessage() for r in caplog.records if r.name == where.__name__]


def test_a_journal_on_redis_says_once_where_and_what_it_promises(
    harness: Harness, client: redis.Redis, said: Any
) -> None:
    """Only Redis to keep it in (an in-memory checkpointer): the journal keeps its
    records there, survives the worker (a resume is answered from the receipt), and says
    once, naming the server, that a restart of Redis can lose its last records."""
    box = Outbox()
    pending = OnAdapterStore(harness, [send_tool(box)], InMemorySaver(), adapter_store=client)
    assert pending.resume().content == "sent to ann"
    entry = RedisBackend(client).get(NS_JOURNAL, pending.key())
    assert entry is not None and entry["kind"] == "receipt"
    pending.crash()  # the worker died before the step's checkpoint: a new one resumes
    again = pending.resume(rebuilt=True)
    assert again.response_metadata["resilience"]["served_by"] == "journal"
    assert len(box.sent) == 1
    (message,) = said()  # once, though two adapters ran the write
    port = client.connection_pool.connection_kwargs["port"]
    assert f"send_email is a write whose journal is kept in Redis at 127.0.0.1:{port}" in message
    assert "durable=True" in message and "PostgresSaver" in message


def test_redis_is_preferred_to_what_the_process_loses(
    harness: Harness, client: redis.Redis, said: Any
) -> None:
    """An `InMemoryStore` as the adapters' store, a `RedisStore` as the graph's: the
    journal goes to Redis, which at least outlives the worker."""
    from langgraph.store.memory import InMemoryStore

    box = Outbox()
    pending = OnAdapterStore(
        harness, [send_tool(box)], InMemorySaver(), adapter_store=InMemoryStore(),
        store=RedisStore(client),
    )  # fmt: skip
    pending.resume()
    assert RedisBackend(client).get(NS_JOURNAL, pending.key())["kind"] == "receipt"
    assert len(said()) == 1


def test_what_a_redis_restart_loses_runs_again(
    harness: Harness, client: redis.Redis, said: Any
) -> None:
    """What the warning says may happen: the receipt lost with the server's data (here
    FLUSHALL, as a restart without persistence), the resumed write runs again."""
    box = Outbox()
    pending = OnAdapterStore(harness, [send_tool(box)], InMemorySaver(), adapter_store=client)
    pending.resume()
    pending.crash()
    client.flushall()
    pending.resume(rebuilt=True)
    assert len(box.sent) == 2


def test_a_redis_said_durable_keeps_the_journal_without_a_word(
    harness: Harness, client: redis.Redis, said: Any
) -> None:
    box = Outbox()
    durable = RedisBackend(client, durable=True)
    pending = OnAdapterStore(harness, [send_tool(box)], InMemorySaver(), adapter_store=durable)
    pending.resume()
    assert durable.get(NS_JOURNAL, pending.key())["kind"] == "receipt"
    assert said() == []


def test_a_durable_checkpointer_keeps_the_journal_beside_a_redis_store(
    harness: Harness, client: redis.Redis, said: Any, db: str, saver: Any
) -> None:
    """Redis for the breaker, dedup and caches, a SQLite checkpointer: the journal goes
    to the checkpointer's database, and nothing needs saying."""
    box = Outbox()
    pending = OnAdapterStore(harness, [send_tool(box)], saver(db), adapter_store=client)
    pending.resume()
    assert pending.key() in _entries(db)
    assert RedisBackend(client).get(NS_JOURNAL, pending.key()) is None
    assert said() == []
