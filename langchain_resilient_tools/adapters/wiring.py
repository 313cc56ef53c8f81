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
from typing import TYPE_CHECKING, Any

from ..core.call import Call
from ..core.errors import for_author
from ..core.idempotency import keyed_request
from ..runtime.executor import TimedRunner
from ..runtime.offload import bridged, offloaded

if TYPE_CHECKING:
    from langchain.agents.middleware.types import ToolCallRequest

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


def run_with(
    handler: Callable[[ToolCallRequest], Any], request: ToolCallRequest
) -> Callable[[Call], Any]:
    """How the middleware runs a call (sync): `create_agent`'s ToolNode ``execute`` with the
    call's (repaired) arguments and idempotency key; a wiring bug raised for the author."""
    return authored(
        lambda c: handler(
            bridged(keyed_request(request, c, {**request.tool_call, "args": c.args}), c)
        )
    )


def arun_with(
    handler: Callable[[ToolCallRequest], Awaitable[Any]],
    request: ToolCallRequest,
    runner: TimedRunner,
) -> Callable[[Call], Awaitable[Any]]:
    """`run_with`, async: a sync tool still runs on the pipeline's own workers."""
    return aauthored(
        lambda c: handler(
            offloaded(keyed_request(request, c, {**request.tool_call, "args": c.args}), c, runner)
        )
    )
