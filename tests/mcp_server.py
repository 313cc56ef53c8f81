"""A small real MCP server for tests: ``python tests/mcp_server.py stdio|http PORT``.

Its tools succeed, raise, hang, return ``isError`` results, and put secrets in errors.
"""

from __future__ import annotations

import asyncio
import sys

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult, TextContent

SECRET = "sk-live-abcdef1234567890abcdef"


def build(port: int = 8000) -> FastMCP:
    server = FastMCP("lrt-test", host="127.0.0.1", port=port, log_level="ERROR")

    @server.tool()
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    @server.tool()
    def get_order(order_id: int) -> str:
        """An order by id (always fails, leaking a secret in its error)."""
        raise RuntimeError(f"db error for {order_id}: password=hunter2 token={SECRET}")

    @server.tool()
    def search_docs(query: str) -> CallToolResult:
        """A search that reports an isError result."""
        return CallToolResult(
            content=[TextContent(type="text", text=f"index offline (api_key={SECRET})")],
            isError=True,
        )

    @server.tool()
    async def get_slow(query: str) -> str:
        """Hangs far past any test timeout."""
        await asyncio.sleep(5)
        return "late"

    return server


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "http":
        build(int(sys.argv[2])).run("streamable-http")
    else:
        build().run("stdio")
