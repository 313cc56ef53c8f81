"""Misbehaving tools for tests: each counts its executions."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import Counter
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

CALLS: Counter[str] = Counter()


def counted(
    name: str, fn: Any, *, coroutine: Any = None, description: str | None = None
) -> BaseTool:
    """A StructuredTool `name` that counts each execution in `CALLS`."""

    @functools.wraps(fn)
    def run(**kwargs: Any) -> Any:
        CALLS[name] += 1
        return fn(**kwargs)

    @functools.wraps(coroutine or fn)
    async def arun(**kwargs: Any) -> Any:
        CALLS[name] += 1
        return await coroutine(**kwargs)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun if coroutine else None,
        name=name,
        description=description or f"The {name} tool.",
        infer_schema=True,
    )


def started(name: str, at_least: int = 1, within: float = 30.0) -> int:
    """`CALLS[name]` once it is `at_least` (or after `within` s, whatever it is then).

    An attempt cut at a short timeout may reach its tool only after the call was
    answered: on a loaded machine the worker thread can start late. Count executions of
    a hung tool with this, not with `CALLS` read at once.
    """
    until = time.monotonic() + within
    while CALLS[name] < at_least and time.monotonic() < until:
        time.sleep(0.005)
    return CALLS[name]


def ok_tool(name: str = "get_weather") -> BaseTool:
    def get(city: str) -> str:
        return f"sunny in {city}"

    return counted(name, get)


def failing_tool(name: str, exc: BaseException) -> BaseTool:
    def fail(query: str = "") -> str:
        raise exc

    return counted(name, fail)


def flaky_tool(
    name: str, failures: int, exc_type: type[BaseException] = ConnectionError
) -> BaseTool:
    state = {"left": failures}
    lock = threading.Lock()

    def flaky(query: str = "") -> str:
        with lock:
            if state["left"] > 0:
                state["left"] -= 1
                raise exc_type("service unavailable, token=sk-live-abcdef1234567890abcdef")
        return f"result for {query}"

    return counted(name, flaky)


def hung_sync_tool(name: str, release: threading.Event) -> BaseTool:
    def hang(query: str = "") -> str:
        release.wait(30)
        return "late"

    return counted(name, hang)


def hung_async_tool(name: str, cancelled: list[str]) -> BaseTool:
    async def hang(query: str = "") -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return "late"

    async def counted_hang(query: str = "") -> str:
        CALLS[name] += 1
        return await hang(query)

    # Async-only, as MCP tools are: sync paths must run (and cancel) the coroutine.
    return StructuredTool.from_function(
        coroutine=counted_hang, name=name, description=f"The {name} tool."
    )
