"""The invariant checker must catch a deliberately broken pipeline."""

from __future__ import annotations

from typing import Any

import pytest

from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.core.errors import AttemptTimeout, ToolRaised
from langchain_resilient_tools.pipeline.retry import stage as retry
from tests.conftest import Harness
from tests.reliability.faults import CallSpec, Scenario, ToolSpec
from tests.reliability.invariants import STATS, check_scenario

# A write that fails transiently once, then would succeed: it must run once, not twice.
WRITE = Scenario(
    tools=(
        ToolSpec("create_flap1_0", "flap1", False, False),
        ToolSpec("get_ok_1", "ok", True, False),
    ),
    calls=(
        CallSpec("w", "valid", "create_flap1_0", "q0"),
        CallSpec("r", "valid", "get_ok_1", "q1"),
    ),
    max_attempts=3,
)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("adapter", ["node", "tool", "middleware"])
def test_retrying_a_non_idempotent_tool_is_caught(
    adapter: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert check_scenario(Harness(adapter, mode), WRITE) == []  # the real pipeline: clean

    def retries_everything(call: Call) -> bool:
        return call.resolved.policy.retry.max_attempts > 1  # idempotency ignored: broken

    def retry_blind(call: Call, exc: BaseException) -> bool:
        return isinstance(exc, (AttemptTimeout, ToolRaised))  # idempotency ignored: broken

    monkeypatch.setattr(retry, "_retries", retries_everything)
    monkeypatch.setattr(retry, "should_retry", retry_blind)
    before = STATS.violations
    violations = check_scenario(Harness(adapter, mode), WRITE)
    STATS.add(violations=before - STATS.violations)  # expected here: not counted as real ones
    assert any("NON-idempotent create_flap1_0(q0) executed 2 times" in v for v in violations), (
        violations
    )


def test_dropping_an_answer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_resilient_tools import ResilientToolNode

    original = ResilientToolNode._combine_tool_outputs

    def drop_last(self: Any, outputs: list[Any], input_type: Any) -> Any:
        return original(self, outputs[:-1], input_type)

    monkeypatch.setattr(ResilientToolNode, "_combine_tool_outputs", drop_last)
    before = STATS.violations
    violations = check_scenario(Harness("node", "sync"), WRITE)
    STATS.add(violations=before - STATS.violations)
    assert any("answered 0 times" in v for v in violations), violations
