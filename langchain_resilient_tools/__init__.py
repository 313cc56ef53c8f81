"""langchain-resilient-tools: a resilience layer between LLM agents and their tools.

Three adapters run one pipeline: `ResilientTool` wraps a tool, `ResilientToolNode`
replaces LangGraph's `ToolNode`, and `ResilientToolsMiddleware` plugs into
`langchain.agents.create_agent`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import ToolErrorType
from ._node import ResilientToolNode
from ._policy import BreakerPolicy, RetryPolicy, ToolPolicy
from ._state import ResilientToolsState
from ._testing import set_testing
from ._tool import ResilientTool

if TYPE_CHECKING:
    from ._middleware import ResilientToolsMiddleware

__all__ = [
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


def __getattr__(name: str) -> Any:
    # The middleware needs the optional `langchain` package; import it on first use.
    if name == "ResilientToolsMiddleware":
        from ._middleware import ResilientToolsMiddleware

        return ResilientToolsMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
