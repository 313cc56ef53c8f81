"""Ambiguous writes verified: ``ToolPolicy(unknown_outcome=UnknownOutcome(verify=...))`` through every adapter, sync and async.

A fake order service records each order under the call's idempotency key; a lookup by
that key tells whether a write whose outcome was unknown took effect. No path runs a
write more than twice, and never twice when the first run may still be going on.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool

from langchain_resilient_tools import ToolPolicy, UnknownOutcome, VerifyInfo
from langchain_resilient_tools.core.errors import AttemptTimeout
from langchain_resilient_tools.pipeline.verify import Lookup, lookup_outcome, may_run_again, settle
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.support.answers import envelope


class OrderService:
    """Orders by idempotency key; `fail` scripts each execution: a connection lost
    ``"before"`` the order is written, ``"after"`` it, or ``"hang"`` after writing."""

    def __init__(self, *fail: str | None, hang: threading.Event | None = None) -> None:
        self.fail = list(fail)
        self.orders: dict[str, str] = {}
        self.keys: list[str] = []
        self.hang = hang

    def create(self, item: str, key: str) -> str:
        self.keys.append(key)
        mode = self.fail.pop(0) if self.fail else None
        if mode == "before":
            raise ConnectionError("connection reset by peer")
        self.orders[key] = f"order o-{len(self.orders) + 1} for {item}"
        if mode == "after":
            raise ConnectionError("connection reset by peer")
        if mode == "hang" and self.hang is not None:
            self.hang.wait(5)
        return self.orders[key]

    def lookup(self, info: VerifyInfo) -> str | None:
        return self.orders.get(info.idempotency_key)

    async def alookup(self, info: VerifyInfo) -> str | None:
        await asyncio.sleep(0)
        return self.lookup(info)


def order_tool(service: OrderService) -> BaseTool:
    def create_order(item: str, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Order an item."""
        return service.create(item, idempotency_key)

    return StructuredTool.from_function(create_order)


CALL = [tool_call("create_order", {"item": "tea"}, id="c1")]


@pytest.fixture(params=["sync", "async"], ids=["sync-verify", "async-verify"])
def lookup_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def policy_for(service: OrderService, kind: str, **kw: Any) -> ToolPolicy:
    verify = service.lookup if kind == "sync" else service.alookup
    return ToolPolicy(unknown_outcome=UnknownOutcome(verify=verify), **kw)


def test_verify_finds_the_write(harness: Harness, lookup_kind: str) -> None:
    service = OrderService("after")
    result = harness.run([order_tool(service)], CALL, policy=policy_for(service, lookup_kind))
    answer = result["c1"]
    assert answer.status == "success"
    assert "order o-1 for tea" in str(answer.content)
    assert "Verified" in str(answer.content)  # marked: the result came from the lookup
    assert answer.response_metadata["resilience"]["served_by"] == "verify"
    assert len(service.keys) == 1  # no second write


def test_verify_finds_none_runs_once_more_with_the_same_key(
    harness: Harness, lookup_kind: str
) -> None:
    service = OrderService("before")
    result = harness.run([order_tool(service)], CALL, policy=policy_for(service, lookup_kind))
    assert result["c1"].status == "success"
    assert "order o-1 for tea" in str(result["c1"].content)
    assert len(service.keys) == 2 and service.keys[0] == service.keys[1]
    assert len(service.orders) == 1


@pytest.mark.parametrize("lost", ["after", "before"], ids=["found", "not-found-ran-again"])
def test_a_verified_write_is_a_write_that_ran_when_the_model_sends_it_again(
    harness: Harness, lookup_kind: str, lost: str
) -> None:
    """The lookup settled the first call (it took effect, or it did not and the one more
    run did): the model's re-send in its next turn is a repeat of a write that ran,
    blocked as one. Before, a write the lookup found was not kept by dedup (only the
    tool's and the cache's answers were), and the re-send ran it a second time."""
    service = OrderService(lost)
    turns = [[tool_call("create_order", {"item": "tea"}, id="c1")],
             [tool_call("create_order", {"item": "tea"}, id="c2")]]  # fmt: skip
    policy = policy_for(service, lookup_kind)
    first, second = harness.run_turns([order_tool(service)], turns, policy=policy)
    assert first["c1"].status == "success"
    assert envelope(second["c2"])["error"] == "duplicate_call"
    assert len(service.orders) == 1


def test_a_write_never_runs_a_third_time(harness: Harness) -> None:
    service = OrderService("before", "before", None)
    result = harness.run([order_tool(service)], CALL, policy=policy_for(service, "sync"))
    assert envelope(result["c1"])["error"] == "unknown_outcome"
    assert len(service.keys) == 2 and service.orders == {}


def test_a_failed_lookup_answers_unknown_outcome(harness: Harness) -> None:
    service = OrderService("after")

    def broken(info: VerifyInfo) -> str | None:
        raise RuntimeError("orders index unavailable")

    result = harness.run(
        [order_tool(service)],
        CALL,
        policy=ToolPolicy(unknown_outcome=UnknownOutcome(verify=broken)),
    )
    assert envelope(result["c1"])["error"] == "unknown_outcome"
    assert len(service.keys) == 1


def test_a_lookup_that_does_not_answer_in_time_is_unknown(harness: Harness) -> None:
    service = OrderService("after")
    release = harness.hang_event()

    async def stuck(info: VerifyInfo) -> str | None:
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 5)
        return None

    policy = ToolPolicy(unknown_outcome=UnknownOutcome(verify=stuck, verify_timeout=0.05))
    result = harness.run([order_tool(service)], CALL, policy=policy)
    assert envelope(result["c1"])["error"] == "unknown_outcome"
    assert len(service.keys) == 1


def test_after_a_timeout_a_write_not_found_is_not_run_again(harness: Harness) -> None:
    """The timed-out attempt may still be on its way: "not found yet" is not "not done"."""
    service = OrderService("before")
    release = harness.hang_event()

    def slow_lookup(info: VerifyInfo) -> str | None:
        return None

    def create_order(item: str, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Order an item."""
        release.wait(5)
        return service.create(item, idempotency_key)

    tool = StructuredTool.from_function(create_order)
    policy = ToolPolicy(
        unknown_outcome=UnknownOutcome(verify=slow_lookup), timeout=0.2
    )  # time for the write to start
    result = harness.run([tool], CALL, policy=policy)
    assert envelope(result["c1"])["error"] == "unknown_outcome"
    release.set()
    assert len(service.keys) <= 1  # only the abandoned first attempt, if it got there


def test_reads_are_not_verified(harness: Harness) -> None:
    calls = []

    def get_order(item: str) -> str:
        """Read an order."""
        raise ConnectionError("reset")

    def lookup(info: VerifyInfo) -> str | None:
        calls.append(info)
        return "found"

    policy = ToolPolicy(retry={"max_attempts": 1}, unknown_outcome=UnknownOutcome(verify=lookup))  # type: ignore[arg-type]
    tool = StructuredTool.from_function(get_order)
    result = harness.run([tool], [tool_call("get_order", {"item": "tea"}, id="c1")], policy=policy)
    assert envelope(result["c1"])["error"] == "transient_failure"
    assert calls == []


def test_pure_decisions() -> None:
    assert lookup_outcome(None) is Lookup.NOT_DONE
    assert lookup_outcome("order o-1") == "order o-1"
    assert may_run_again(ConnectionError("reset"))
    assert not may_run_again(AttemptTimeout(1.0, started=True))
    assert may_run_again(AttemptTimeout(1.0, started=False))
    lost, timed_out = ConnectionError("reset"), AttemptTimeout(1.0, started=True)
    assert settle("order o-1", lost) == settle("order o-1", timed_out) == "answer"
    assert settle(Lookup.NOT_DONE, lost) == "again"
    assert settle(Lookup.NOT_DONE, timed_out) == "raise"
    assert settle(Lookup.UNKNOWN, lost) == "raise"
