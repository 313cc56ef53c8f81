"""The public surface is pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import langchain_resilient_tools as lrt


def test_all_is_pinned_and_sorted() -> None:
    assert lrt.__all__ == [
        "BreakerPolicy",
        "ResilientTool",
        "ResilientToolNode",
        "ResilientToolsMiddleware",
        "ResilientToolsState",
        "RetryPolicy",
        "ToolErrorType",
        "ToolPolicy",
        "set_testing",
    ]
    assert sorted(lrt.__all__) == lrt.__all__


def test_every_name_imports() -> None:
    for name in lrt.__all__:
        assert getattr(lrt, name) is not None


def test_error_types_match_the_design() -> None:
    assert {t.value for t in lrt.ToolErrorType} == {
        "invalid_arguments", "malformed_call", "unknown_tool", "timeout", "unknown_outcome",
        "transient_failure", "rate_limited", "tool_error", "circuit_open", "duplicate_call",
        "low_quality_result", "internal_error",
    }  # fmt: skip
