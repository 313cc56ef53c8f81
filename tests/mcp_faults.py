"""A fault-injecting MCP server for tests: ``python tests/mcp_faults.py`` (stdio).

With ``LRT_FAULTS_PIDFILE`` set it appends its process id to that file.

`busy_read` blocks the server in sync code (the whole server stops answering, as a
server stuck in a sync library call does); `read_slow` awaits for a long time.
"""

from __future__ import annotations

import asyncio
import os
import time

from mcp.server.fastmcp import FastMCP

server = FastMCP("lrt-faults", log_level="ERROR")


@server.tool()
def busy_read(seconds: float) -> str:
    """Blocks the whole server in sync code for `seconds`."""
    time.sleep(seconds)
    return "done"


@server.tool()
async def read_slow(seconds: float) -> str:
    """Answers after `seconds`."""
    await asyncio.sleep(seconds)
    return "done"


if __name__ == "__main__":
    pidfile = os.environ.get("LRT_FAULTS_PIDFILE")
    if pidfile:  # tests check that no server outlives its client
        with open(pidfile, "a") as f:
            f.write(f"{os.getpid()}\n")
    server.run("stdio")
