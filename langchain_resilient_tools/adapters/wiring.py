"""Wiring bugs under `create_agent`: raised for the graph's author, as `ToolNode` raises them.

`ResilientToolNode` is a `ToolNode` and sees a tool's invalid return where ToolNode
checks it (`adapters.node_io`). The middleware runs inside `create_agent`'s own ToolNode
and only sees the `ValueError` / `TypeError` its ``execute`` raised. One raised while that
ToolNode turned the tool's return into messages (an invalid `Command`, a list without its
`ToolMessage`) is a wiring bug: `create_agent`'s ToolNode, with its default error
handling, raises it, and so does the middleware (`for_author`), instead of answering it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from ..core.call import Call
from ..core.errors import for_author

_CHECKS = frozenset({"_normalize_tool_response", "_validate_tool_command"})
_MODULE = "langgraph.prebuilt.tool_node"


def is_wiring_bug(exc: BaseException) -> bool:
    """Whether `exc` was raised by ToolNode's check of what a tool returned."""
    if not isinstance(exc, (ValueError, TypeError)):
        return False
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name in _CHECKS and frame.f_globals.get("__name__") == _MODULE:
            return True
        tb = tb.tb_next
    return False


def authored(run: Callable[[Call], Any]) -> Callable[[Call], Any]:
    """`run`, with a wiring bug it raises marked for the graph's author."""

    def guarded(call: Call) -> Any:
        try:
            return run(call)
        except (ValueError, TypeError) as exc:
            if is_wiring_bug(exc):
                raise for_author(exc) from None
            raise

    return guarded


def aauthored(arun: Callable[[Call], Awaitable[Any]]) -> Callable[[Call], Awaitable[Any]]:
    """The async `authored`."""

    async def guarded(call: Call) -> Any:
        try:
            return await arun(call)
        except (ValueError, TypeError) as exc:
            if is_wiring_bug(exc):
                raise for_author(exc) from None
            raise

    return guarded
