"""The public surface is pinned: adding or removing a name is a deliberate change."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import langchain_resilient_tools as lrt

ROOT = Path(__file__).resolve().parent.parent


def test_all_is_pinned_and_sorted() -> None:
    assert lrt.__all__ == [
        "AdaptiveTimeout",
        "BreakerPolicy",
        "CacheKeyInfo",
        "HumanDecision",
        "IgnoredOptionWarning",
        "OutcomeReview",
        "ResilientTool",
        "ResilientToolNode",
        "ResilientToolsMiddleware",
        "ResilientToolsState",
        "RetryPolicy",
        "ToolErrorType",
        "ToolPolicy",
        "UsageError",
        "VerifyInfo",
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


def test_every_type_the_readme_imports_or_names_is_public() -> None:
    readme = (ROOT / "README.md").read_text()
    imported: set[str] = set()
    for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module == "langchain_resilient_tools":
                imported |= {alias.name for alias in node.names}
    headed = set(re.findall(r"^#### `(\w+)`", readme, flags=re.M))  # the policy reference
    assert headed >= {"ToolPolicy", "RetryPolicy", "BreakerPolicy", "AdaptiveTimeout"}
    assert imported, "the README's examples import from the package root"
    for name in imported | headed:
        assert name in lrt.__all__, name


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
