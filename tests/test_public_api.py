"""The public surface is pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import langchain_resilient_tools as lrt

ROOT = Path(__file__).resolve().parent.parent


def test_all_is_pinned_and_sorted() -> None:
    assert lrt.__all__ == [
        "AdaptiveTimeout",
        "Args",
        "BreakerPolicy",
        "Cache",
        "CacheKeyInfo",
        "Dedup",
        "Fallback",
        "Hedge",
        "HumanDecision",
        "IgnoredOptionWarning",
        "Journal",
        "Limits",
        "OutcomeReview",
        "Output",
        "ResilientTool",
        "ResilientToolNode",
        "ResilientToolsMiddleware",
        "ResilientToolsState",
        "ResultChecks",
        "RetryBudget",
        "RetryPolicy",
        "Shared",
        "Timeouts",
        "ToolErrorType",
        "ToolPolicy",
        "UnknownOutcome",
        "UsageError",
        "VerifyInfo",
        "answer_dangling_calls",
        "dangling_calls_node",
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
        "low_quality_result", "internal_error", "not_run",
    }  # fmt: skip


def _fresh(code: str) -> str:
    """Run `code` in a new interpreter that imports this checkout; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_wrapper_alone_does_not_import_the_node_the_graph_or_langchain() -> None:
    out = _fresh(
        "import sys\n"
        "from langchain_resilient_tools import ResilientTool, ToolPolicy\n"
        "print(sorted({m.split('.')[0] + '.' + m.split('.')[1] for m in sys.modules\n"
        "    if m.startswith(('langgraph.prebuilt', 'langgraph.graph', 'langchain.'))}))"
    )
    assert out == "[]"
    out = _fresh(
        "import sys\n"
        "from langchain_resilient_tools import ResilientToolNode\n"
        "print('langgraph.prebuilt' in sys.modules)"
    )
    assert out == "True"  # the node still imports on first use


def test_the_middleware_without_langchain_names_the_extra() -> None:
    out = _fresh(
        "import sys\n"
        "sys.modules['langchain'] = None  # as if `langchain` were not installed\n"
        "try:\n"
        "    from langchain_resilient_tools import ResilientToolsMiddleware\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert 'pip install "langchain-resilient-tools[agents]"' in out
