"""Result cache for idempotent tools: hits skip the tool but are still recorded."""

from __future__ import annotations

from typing import Any

from langchain_resilient_tools import Cache, ToolPolicy
from langchain_resilient_tools.state.results import MemoryStore
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import CALLS, counted, ok_tool


def test_store_honours_each_readers_max_age() -> None:
    clock = FakeClock()
    store = MemoryStore(retention=100, maxsize=8, clock=clock)
    store.put("k", "v")
    clock.advance(30)
    assert store.get("k", max_age=10) is None  # too old for a 10 s cache
    entry = store.get("k", max_age=60)  # young enough for a 60 s stale bound
    assert entry is not None and entry.value == "v" and entry.stored_at == 1000.0
    clock.advance(71)
    assert store.get("k", max_age=1000) is None  # past retention: evicted


def _turns(city: str = "Paris", n: int = 3) -> list[list[dict[str, Any]]]:
    return [[tool_call("get_weather", {"city": city}, id=f"c{i}")] for i in range(n)]


def test_cache_hit_skips_the_tool_and_is_recorded(harness: Harness) -> None:
    clock = FakeClock()
    results = harness.run_turns(
        [ok_tool()],
        _turns(),
        # separate conversations (no dedup, only the cache) of a pure tool shared globally
        policy=ToolPolicy(clock=clock, cache=Cache(ttl_s=60, scope="global")),
        thread_per_turn=True,
        before_turn=lambda i: clock.advance(5),
    )
    assert CALLS["get_weather"] == 1
    first, hit = results[0]["c0"], results[2]["c2"]
    assert first.content == "sunny in Paris"
    assert "resilience" not in first.response_metadata  # served by the tool, untouched
    assert hit.status == "success" and hit.tool_call_id == "c2"
    assert hit.content.endswith("sunny in Paris")
    assert "cached result of the same call made 10 s ago" in hit.content
    record = hit.response_metadata["resilience"]
    assert record["served_by"] == "cache" and record["attempts"] == 0
    assert record["outcome"] == "success"


def test_cache_expires_after_its_ttl(harness: Harness) -> None:
    clock = FakeClock()
    harness.run_turns(
        [ok_tool()],
        _turns(n=2),
        policy=ToolPolicy(clock=clock, cache=Cache(ttl_s=10, scope="global")),
        thread_per_turn=True,
        before_turn=lambda i: clock.advance(11),
    )
    assert CALLS["get_weather"] == 2


def test_writes_are_never_cached(harness: Harness) -> None:
    def create(item: str) -> str:
        return f"created {item}"

    tool = counted("create_item", create)
    turns = [[tool_call("create_item", {"item": "x"}, id=f"c{i}")] for i in range(2)]
    harness.run_turns(
        [tool],
        turns,
        policy=ToolPolicy(idempotent=False, dedup="off", cache=Cache(ttl_s=60)),
        thread_per_turn=True,
    )
    assert CALLS["create_item"] == 2


def test_pipeline_hook_sees_cache_hits() -> None:
    from langchain_resilient_tools.core.policy import PolicyResolver
    from langchain_resilient_tools.pipeline.driver import Outcome, Pipeline

    outcomes: list[Outcome] = []
    pipeline = Pipeline(
        # no thread: shared only when the result is everyone's ("global")
        PolicyResolver(
            ToolPolicy(cache=Cache(ttl_s=60, scope="global"), clock=FakeClock(), dedup="off")
        ),
        on_outcome=outcomes.append,
    )
    tool = ok_tool()
    for i in range(2):
        call = pipeline.new_call(call_id=f"c{i}", name=tool.name, args={"city": "Oslo"}, tool=tool)
        call.run = lambda c: tool.invoke(c.args)
        pipeline.run(call)
    assert CALLS["get_weather"] == 1
    assert [o.call.record.served_by for o in outcomes] == ["tool", "cache"]
    assert all(o.ok for o in outcomes)
