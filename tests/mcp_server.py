"""A small real MCP server for tests: ``python tests/mcp_server.py stdio|http PORT``.

Its tools succeed, raise, hang, return ``isError`` results, and put secrets, code
locations and tracebacks in errors.
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
    def fail_with_secret(path: str) -> str:
        """Fails as a server's code does: its error names its code location, a key and
        the directories it serves (FastMCP reports it as an isError result)."""
        raise RuntimeError(
            f"backend rejected {path} (api_key={SECRET}) at /srv/mcp/tools.py line 12. "
            "Allowed directories: /srv/data, /tmp/work"
        )

    @server.tool()
    def read_report(path: str) -> CallToolResult:
        """Reports an isError result that carries a traceback of the server's own."""
        text = (
            "Traceback (most recent call last):\n"
            '  File "/srv/mcp/reports.py", line 40, in read_report\n'
            "    return open(path).read()\n"
            f"FileNotFoundError: {path} not found; available reports are in /srv/data/reports"
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], isError=True)

    @server.tool()
    async def get_slow(query: str) -> str:
        """Hangs far past any test timeout (and past the tests' generous real-time bounds)."""
        await asyncio.sleep(30)
        return "late"

    return server


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "http":
        build(int(sys.argv[2])).run("streamable-http")
    else:
        build().run("stdio")
