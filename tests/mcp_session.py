"""A live MCP session held on an event loop of its own thread (as a background app loop)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools


class BackgroundSession:
    """A live stdio session held by a task on an event loop of its own thread, as an
    application that runs its loop in the background holds one."""

    def __init__(self, client: MultiServerMCPClient, server: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._stop = asyncio.Event()
        ready: concurrent.futures.Future[list[BaseTool]] = concurrent.futures.Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(client, server, ready), self.loop)
        self.tools = ready.result(30)

    async def _hold(
        self,
        client: MultiServerMCPClient,
        server: str,
        ready: concurrent.futures.Future[list[BaseTool]],
    ) -> None:
        async with client.session(server) as session:
            ready.set_result(await load_mcp_tools(session))
            await self._stop.wait()

    def run(self, make: Any) -> Any:
        """Run the coroutine `make()` on the session's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(make(), self.loop).result(30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._held.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
