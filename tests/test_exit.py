"""Clean exits: nothing the package started or holds outlives a script or holds up its exit.

Each case runs a short script in a subprocess, as a user would: it prints the time once
its agent has its answer (inside ``asyncio.run`` for the async ones), and the test checks how much later the process was gone and that no MCP
server it started is still running a few seconds on.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("langchain_mcp_adapters")

from langchain_mcp_adapters.client import MultiServerMCPClient

from langchain_resilient_tools import ToolPolicy
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness

ROOT = Path(__file__).parent.parent
FAULTS = Path(__file__).with_name("mcp_faults.py")
EXIT_SLACK_S = 10.0
"""Allowed time between a script's last statement and its process being gone: the
package's own share is at most ~0.5 s, the rest is interpreter teardown on a busy
machine; far below what a process held up by its tools would take (30-60 s)."""

PRELUDE = f"""
import asyncio, json, os, sys, time
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_resilient_tools import ResilientTool, RetryPolicy, ToolPolicy
POLICY = ToolPolicy(timeout=1, retry=RetryPolicy(max_attempts=1))
SERVER = {{
    "transport": "stdio", "command": sys.executable, "args": [{str(FAULTS)!r}],
    "env": {{"LRT_FAULTS_PIDFILE": os.environ["LRT_FAULTS_PIDFILE"]}},
}}
CLIENT = MultiServerMCPClient({{"f": SERVER}})
def end():  # the script's last statement of its own
    print("END", time.time(), flush=True)
"""

SCRIPTS = {
    "sync_mcp_busy_server": """
        tools = {t.name: t for t in asyncio.run(CLIENT.get_tools())}
        tool = ResilientTool.wrap(tools["busy_read"], policy=POLICY)
        print(json.loads(tool.invoke({"seconds": 60}))["error"])
        end()
    """,
    "async_mcp_busy_server": """
        async def main():
            tools = {t.name: t for t in await CLIENT.get_tools()}
            tool = ResilientTool.wrap(tools["busy_read"], policy=POLICY)
            print(json.loads(await tool.ainvoke({"seconds": 60}))["error"])
            end()
        asyncio.run(main())
    """,
    "async_tool_ignores_cancellation": """
        from langchain_core.tools import StructuredTool
        async def stubborn(q: str) -> str:
            until = time.monotonic() + 30
            while time.monotonic() < until:
                try:
                    await asyncio.sleep(until - time.monotonic())
                except asyncio.CancelledError:
                    pass  # ignores every cancellation
            return "late"
        tool = ResilientTool.wrap(
            StructuredTool.from_function(coroutine=stubborn, name="get_x", description="x"),
            policy=ToolPolicy(timeout=0.5, retry=RetryPolicy(max_attempts=1)),
        )
        async def main():
            print(json.loads(await tool.ainvoke({"q": "x"}))["error"])
            end()
        asyncio.run(main())
    """,
}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"  # a zombie has exited (its new parent may not reap it)
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


@pytest.mark.realtime
@pytest.mark.skipif(sys.platform == "win32", reason="process checks use POSIX signals")
@pytest.mark.parametrize("case", list(SCRIPTS))
def test_script_exits_promptly_and_leaves_no_server(case: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "servers.pid"
    script = PRELUDE + textwrap.dedent(SCRIPTS[case])
    env = {**os.environ, "LRT_FAULTS_PIDFILE": str(pidfile), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the script did not exit within 60 s")
    gone = time.time()
    lines = out.split()
    assert proc.returncode == 0 and "END" in lines, out
    assert lines[0] in ("timeout", "unknown_outcome")
    ended = float(lines[lines.index("END") + 1])
    assert gone - ended < EXIT_SLACK_S, f"exit took {gone - ended:.2f} s after the last statement"
    pids = [int(p) for p in pidfile.read_text().split()] if pidfile.exists() else []
    assert pids or "mcp" not in case, "the MCP server did not record its process id"
    for _ in range(50):  # a few seconds at most
        if not any(alive(p) for p in pids):
            break
        time.sleep(0.1)
    leftover = [p for p in pids if alive(p)]
    for p in leftover:
        os.kill(p, 9)
    assert not leftover, f"MCP servers still running after the script: {leftover}"


@pytest.mark.realtime
def test_hung_mcp_read_is_bounded_by_the_default_deadline(harness: Harness) -> None:
    """A user who sets only ``timeout=T`` gets an answer from a server that never
    answers (60 s), and the envelope says how long it waited. The 2T + 1 s arithmetic is
    `test_deadline`'s, on a fake clock; here a real clock bounds the wait generously."""
    client = MultiServerMCPClient(
        {"f": {"transport": "stdio", "command": sys.executable, "args": [str(FAULTS)]}}
    )
    tools = [t for t in asyncio.run(client.get_tools()) if t.name == "read_slow"]
    start = time.monotonic()
    result = harness.run(
        tools, [tool_call("read_slow", {"seconds": 60}, id="c1")], policy=ToolPolicy(timeout=0.5)
    )
    elapsed = time.monotonic() - start
    data = json.loads(str(result["c1"].content))
    assert data["error"] == "timeout" and data["attempts"] >= 2
    assert data["waited_s"] >= 0.5  # at least one 0.5 s timeout
    assert elapsed < 10.0  # 2T + 1 = 2 s, and a loaded machine's overhead; not 60 s
