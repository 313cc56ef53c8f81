"""langchain-resilient-tools: a resilience layer between LLM agents and their tools.

Three adapters run one pipeline: `ResilientTool` wraps a tool, `ResilientToolNode`
replaces LangGraph's `ToolNode`, and `ResilientToolsMiddleware` plugs into
`langchain.agents.create_agent`.

`ResilientToolNode`, `ResilientToolsMiddleware` and `ResilientToolsState` are imported
on first use: they need `langgraph.prebuilt`, the optional `langchain` package and
`langgraph.graph`, which a user of the wrapper alone should not pay for at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .adapters.tool import ResilientTool
from .core.errors import IgnoredOptionWarning, ToolErrorType, UsageError
from .core.policy import (
    AdaptiveTimeout,
    Args,
    BreakerPolicy,
    Cache,
    CacheKeyInfo,
    Dedup,
    Fallback,
    Hedge,
    Journal,
    Limits,
    Output,
    ResultChecks,
    RetryBudget,
    RetryPolicy,
    Shared,
    Timeouts,
    ToolPolicy,
    UnknownOutcome,
    VerifyInfo,
)
from .core.review import HumanDecision, OutcomeReview
from .core.testing import set_testing

if TYPE_CHECKING:
    from .adapters.dangling import answer_dangling_calls, dangling_calls_node
    from .adapters.middleware import ResilientToolsMiddleware
    from .adapters.node import ResilientToolNode
    from .state.graph import ResilientToolsState

__all__ = [
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

AGENTS_HINT = (
    "ResilientToolsMiddleware needs the `langchain` package (for create_agent): "
    'pip install "langchain-resilient-tools[agents]"'
)
"""The error message of importing the middleware without the ``agents`` extra."""


def __getattr__(name: str) -> Any:
    if name == "ResilientToolNode":
        from .adapters.node import ResilientToolNode

        return ResilientToolNode
    if name in ("answer_dangling_calls", "dangling_calls_node"):
        from .adapters import dangling

        return getattr(dangling, name)
    if name == "ResilientToolsState":
        from .state.graph import ResilientToolsState

        return ResilientToolsState
    if name == "ResilientToolsMiddleware":
        try:
            from .adapters.middleware import ResilientToolsMiddleware
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".")[0] != "langchain":
                raise
            raise ModuleNotFoundError(AGENTS_HINT, name=exc.name) from exc
        return ResilientToolsMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
