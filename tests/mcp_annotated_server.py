"""A real MCP server whose tools carry MCP tool annotations: ``python tests/mcp_annotated_server.py``
(stdio).

Each tool's first call with a `key` that starts with ``stall`` hangs (far past the tests'
timeout); any other call answers at once, saying how many times the tool ran with that
key. So a test sees, through langchain-mcp-adapters, whether a timed-out call was sent
again (a read, or a write safe to repeat) or not (a write).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

RUNS: Counter[tuple[str, str]] = Counter()


async def _run(tool: str, key: str) -> str:
    RUNS[tool, key] += 1
    if key.startswith("stall") and RUNS[tool, key] == 1:
        await asyncio.sleep(60)
    return f"{tool} ran {RUNS[tool, key]} time(s) for {key}"


def build() -> FastMCP:
    server = FastMCP("lrt-annotated", log_level="ERROR")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    async def git_log(key: str) -> str:
        """The commit log (read-only; its name reads as neither a read nor a write)."""
        return await _run("git_log", key)

    @server.tool(
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False)
    )
    async def get_or_create_invoice(key: str) -> str:
        """An invoice, created when missing (named like a read; declared destructive)."""
        return await _run("get_or_create_invoice", key)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def sync_report(key: str) -> str:
        """The sync report (read-only; its name reads as neither a read nor a write)."""
        return await _run("sync_report", key)

    @server.tool(annotations=ToolAnnotations(destructiveHint=False, idempotentHint=True))
    async def set_status(key: str) -> str:
        """Sets a status: a write whose repeat changes nothing (declared idempotent)."""
        return await _run("set_status", key)

    @server.tool(annotations=ToolAnnotations(title="Weather"))
    async def get_weather(key: str) -> str:
        """The weather (annotated with a title only: nothing about reads or writes)."""
        return await _run("get_weather", key)

    @server.tool()
    async def create_note(key: str) -> str:
        """A note (not annotated at all)."""
        return await _run("create_note", key)

    return server


if __name__ == "__main__":
    build().run("stdio")
