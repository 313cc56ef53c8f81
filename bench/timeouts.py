"""Timeout precision: how late does a hung tool's answer come, past its timeout?

A sync tool that blocks on an Event and an async tool that never finishes are called
through a `ResilientToolNode` (called directly) with ``timeout=0.1``; each sample is one
AIMessage with one call. We record wall time to the answer minus the timeout and report
p50/p95/max. The tools are declared non-idempotent so that the timeout is answered
(``unknown_outcome``) after one attempt instead of being retried; each hung sync thread
is released after its sample, so abandoned threads never pile up.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langchain_resilient_tools import ResilientToolNode, ToolPolicy

from . import _util
from .overhead import _DIRECT_CONFIG

TIMEOUT_S = 0.1


def _hung_tools(release: list[threading.Event]) -> tuple[BaseTool, BaseTool]:
    def hang_sync(x: int) -> str:
        """Hang until released."""
        release[-1].wait(30)
        return "late"

    async def hang_async(x: int) -> str:
        """Hang until cancelled."""
        await asyncio.sleep(3600)
        return "late"

    sync_tool = StructuredTool.from_function(func=hang_sync, name="hang_sync", description="Hang.")
    async_tool = StructuredTool.from_function(
        coroutine=hang_async, name="hang_async", description="Hang."
    )
    return sync_tool, async_tool


def _state(name: str, i: int) -> dict[str, Any]:
    call = {"name": name, "args": {"x": i}, "id": f"{name}_{i}", "type": "tool_call"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def _check(out: dict[str, Any]) -> str:
    (msg,) = out["messages"]
    assert isinstance(msg, ToolMessage) and msg.status == "error", msg
    return str(msg.response_metadata["resilience"]["error"])


def run(*, samples: int = 30, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """`samples` timed-out calls of each tool; lateness statistics in milliseconds."""
    release = [threading.Event()]
    sync_tool, async_tool = _hung_tools(release)
    policy = ToolPolicy(timeout=timeout, idempotent=False)
    node = ResilientToolNode([sync_tool, async_tool], policy=policy)
    late: dict[str, list[float]] = {"sync": [], "async": []}
    errors: set[str] = set()
    for i in range(samples):
        start = time.perf_counter()
        errors.add(_check(node.invoke(_state("hang_sync", i), _DIRECT_CONFIG)))
        late["sync"].append(time.perf_counter() - start - timeout)
        release[-1].set()  # let the abandoned thread finish
        release.append(threading.Event())

    async def async_samples() -> None:
        for i in range(samples):
            start = time.perf_counter()
            errors.add(_check(await node.ainvoke(_state("hang_async", i), _DIRECT_CONFIG)))
            late["async"].append(time.perf_counter() - start - timeout)

    asyncio.run(async_samples())
    release[-1].set()
    stats = {
        mode: {k: (round(v * 1000, 2) if k != "n" else v) for k, v in _util.percentiles(xs).items()}
        for mode, xs in late.items()
    }
    return {"timeout_s": timeout, "late_ms": stats, "error_types": sorted(errors)}


def table(result: dict[str, Any]) -> str:
    rows = [[mode, s["n"], s["p50"], s["p95"], s["max"]] for mode, s in result["late_ms"].items()]
    head = ["hung tool", "samples", "late p50 ms", "late p95 ms", "late max ms"]
    return f"timeout {result['timeout_s']} s, answered as {result['error_types']}\n" + (
        _util.format_table(head, rows)
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.timeouts")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    result = run(samples=5 if args.quick else 30)
    print(table(result))
    return result


if __name__ == "__main__":
    main()
