"""Fallback chain: stale result, then stub data, then the error envelope."""

from __future__ import annotations

import json
from typing import Any

import pytest

from langchain_resilient_tools import (
    BreakerPolicy,
    Cache,
    Fallback,
    RetryPolicy,
    ToolPolicy,
    UsageError,
)
from langchain_resilient_tools.core.policy import overlay
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import CALLS, counted


class Service:
    def __init__(self) -> None:
        self.up = True
        self.error: BaseException = ConnectionError("down")

    def get(self, city: str) -> str:
        if not self.up:
            raise self.error
        return f"sunny in {city}"

    def create(self, city: str) -> str:
        if not self.up:
            raise self.error
        return f"created {city}"


def _policy(clock: FakeClock, **fields: Any) -> ToolPolicy:
    base = ToolPolicy(
        clock=clock, retry=RetryPolicy(max_attempts=2), cache=Cache(scope="global"),
        fallback=Fallback(stale_s=600.0, stub={"forecast": "unknown"}), dedup="off",
    )  # fmt: skip
    return overlay(base, ToolPolicy(**fields))  # group by group, as a per-tool policy


def _run(
    harness: Harness, policy: ToolPolicy, *, name: str = "get_weather", minutes: float = 5
) -> tuple[list[Any], Service]:
    clock = policy.clock
    assert isinstance(clock, FakeClock)
    service = Service()
    fn = service.get if name.startswith("get") else service.create
    turns = [[tool_call(name, {"city": "Paris"}, id=f"c{i}")] for i in range(2)]

    def before(i: int) -> None:
        if i == 1:
            clock.advance(minutes * 60)
            service.up = False

    results = harness.run_turns(
        [counted(name, fn)], turns, policy=policy, before_turn=before, thread_per_turn=True
    )
    return [r[f"c{i}"] for i, r in enumerate(results)], service


def test_stale_result_first_marked_with_its_age(harness: Harness) -> None:
    (fresh, stale), _ = _run(harness, _policy(FakeClock()))
    assert fresh.content == "sunny in Paris"
    assert stale.status == "success"
    assert stale.tool_call_id == "c1"
    assert "last good result for the same call, from 5 min ago" in stale.content
    assert stale.content.endswith("sunny in Paris")
    record = stale.response_metadata["resilience"]
    assert record["served_by"] == "stale_cache" and record["attempts"] == 2
    assert CALLS["get_weather"] == 3


def test_too_old_stale_result_falls_through_to_the_stub(harness: Harness) -> None:
    (_, answer), _ = _run(harness, _policy(FakeClock()), minutes=11)
    assert answer.status == "success"
    assert "substitute data, not a live result" in answer.content
    assert json.loads(answer.content.split("\n", 1)[1]) == {"forecast": "unknown"}
    assert answer.response_metadata["resilience"]["served_by"] == "fallback"


def test_order_is_configurable(harness: Harness) -> None:
    policy = _policy(FakeClock(), fallback=Fallback(order=("fallback", "stale_cache")))
    (_, answer), _ = _run(harness, policy)
    assert answer.response_metadata["resilience"]["served_by"] == "fallback"


def test_callable_fallback_gets_tool_and_args(harness: Harness) -> None:
    seen: list[Any] = []

    def stub(tool: str, args: dict[str, Any]) -> str:
        seen.append((tool, args))
        return f"no data for {args['city']}"

    (_, answer), _ = _run(harness, _policy(FakeClock(), fallback=Fallback(stale_s=None, stub=stub)))
    assert answer.content.endswith("no data for Paris")
    assert seen == [("get_weather", {"city": "Paris"})]


def test_without_fallbacks_the_error_envelope_answers(harness: Harness) -> None:
    policy = _policy(FakeClock(), fallback=Fallback(stale_s=None, stub=None))
    (_, answer), _ = _run(harness, policy)
    assert answer.status == "error"
    assert json.loads(answer.content)["error"] == "transient_failure"


def test_bad_arguments_never_fall_back(harness: Harness) -> None:
    clock = FakeClock()
    service = Service()
    service.up, service.error = False, ValueError("no such city")
    result = harness.run(
        [counted("get_weather", service.get)],
        [tool_call("get_weather", {"city": "Atlantis"}, id="c0")],
        policy=_policy(clock),
    )
    assert result["c0"].status == "error"
    assert json.loads(result["c0"].content)["error"] == "tool_error"


def test_writes_are_never_served_from_a_cache(harness: Harness) -> None:
    policy = _policy(FakeClock(), fallback=None, idempotent=False)
    (first, answer), _ = _run(harness, policy, name="create_booking")
    assert first.content == "created Paris"
    assert answer.status == "error"
    assert json.loads(answer.content)["error"] == "unknown_outcome"  # maybe it took effect
    assert CALLS["create_booking"] == 2


@pytest.mark.parametrize("stub", [True, False], ids=["stub", "no-stub"])
def test_write_gets_the_stub_only_when_it_surely_did_not_run(harness: Harness, stub: bool) -> None:
    clock = FakeClock()
    service = Service()
    service.up = False
    breaker = BreakerPolicy(failure_threshold=1, recovery_time=60)
    policy = _policy(clock, idempotent=False, breaker=breaker, fallback="queued" if stub else None)
    tool = counted("create_booking", service.create)
    turns = [[tool_call("create_booking", {"city": "Paris"}, id=f"c{i}")] for i in range(2)]
    results = harness.run_turns([tool], turns, policy=policy, thread_per_turn=True)
    first, second = results[0]["c0"], results[1]["c1"]
    assert json.loads(first.content)["error"] == "unknown_outcome"  # it may have run
    assert CALLS["create_booking"] == 1  # the open circuit kept the second call away
    if stub:
        assert second.status == "success" and "substitute data" in second.content
    else:
        assert json.loads(second.content)["error"] == "circuit_open"


# -- the options group, and the spellings of the previous release --------------------


def test_the_old_spellings_still_work_and_name_the_new_one(harness: Harness) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        old = ToolPolicy(
            clock=FakeClock(), retry=RetryPolicy(max_attempts=2), dedup="off",
            cache=Cache(scope="global", stale_s=600.0, fallback_order=("stale_cache",)),
        )  # fmt: skip
    said = [str(w.message) for w in caught]
    assert said == [
        "Cache(stale_s=...) is deprecated: write ToolPolicy(fallback=Fallback(stale_s=...)); "
        "the old name will be removed in the next minor release",
        "Cache(fallback_order=...) is deprecated: write ToolPolicy(fallback=Fallback(order=...)); "
        "the old name will be removed in the next minor release",
    ]
    assert {w.filename for w in caught} == {__file__}  # it points at the code that used it
    assert old.cache == Cache(scope="global")
    assert old.fallback == Fallback(stale_s=600.0, order=("stale_cache",))
    (_, stale), _ = _run(harness, old)  # and it serves what the new spelling serves
    assert stale.response_metadata["resilience"]["served_by"] == "stale_cache"


def test_one_option_given_twice_must_agree() -> None:
    with pytest.warns(DeprecationWarning):
        same = ToolPolicy(cache=Cache(stale_s=60), fallback=Fallback(stale_s=60, stub="x"))
    assert same.fallback == Fallback(stale_s=60, stub="x")
    with pytest.warns(DeprecationWarning), pytest.raises(UsageError, match="two values"):
        ToolPolicy(cache=Cache(stale_s=60), fallback=Fallback(stale_s=30))
    with pytest.warns(DeprecationWarning), pytest.raises(UsageError, match=r"Fallback\(order"):
        ToolPolicy(cache={"fallback_order": ("fallback",)}, fallback=Fallback(order=()))
    with pytest.raises(ValueError, match="lists a source twice"):
        Fallback(order=("fallback", "fallback"))


def test_an_old_name_read_on_the_cache_says_where_it_is_now() -> None:
    with pytest.raises(AttributeError, match=r"read ToolPolicy\.fallback\.stale_s"):
        _ = ToolPolicy().cache.stale_s
    with pytest.raises(AttributeError, match=r"read ToolPolicy\.fallback\.order"):
        _ = ToolPolicy().cache.fallback_order
    with pytest.warns(DeprecationWarning, match=r"read \.fallback\.stale_s"):
        assert ToolPolicy(fallback=Fallback(stale_s=9)).stale_max_age_s == 9


def test_the_shorthand_is_the_stub_whatever_it_is() -> None:
    """``fallback=data`` keeps its meaning: a dict is stub data, not keyword arguments;
    ``fallback=None`` is no stub, and an old flat name beside it still takes effect."""
    assert ToolPolicy(fallback={"stale_s": 1}).fallback == Fallback(stub={"stale_s": 1})
    assert ToolPolicy(fallback=None).fallback.model_fields_set == {"stub"}
    with pytest.warns(DeprecationWarning):
        flat = ToolPolicy(fallback=None, stale_max_age_s=30)
    assert flat.fallback == Fallback(stale_s=30)
    merged = overlay(ToolPolicy(fallback=Fallback(stale_s=60)), ToolPolicy(fallback="queued"))
    assert merged.fallback == Fallback(stale_s=60, stub="queued")  # group by group
