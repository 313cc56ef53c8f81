"""The same write delivered twice at once: worker processes for `tests.test_double_delivery`.

A round: the parent runs a thread up to its tools' step (`prepare`: the model asked for
one email, ``interrupt_before=["tools"]`` stops the run there) on fresh storage, then
two worker processes resume that thread at the same moment (a `multiprocessing.Barrier`),
as a duplicated queue delivery or a double click makes two replicas do. Each worker opens
its own connections and builds its own graph every round, so the package's table is
first used by both at once (on SQLite, in files nobody has used it in yet).

The write, `send_email`, appends one line per email sent to ``effects.jsonl`` in the
round's folder (``O_APPEND``, fsynced): the parent counts the lines. Each worker sends
back what its caller was told (`answer`).

Storage (`BACKENDS`): ``sqlite_store``: `SqliteSaver` + langgraph's `SqliteStore` (the
journal lives in the store's file); ``sqlite_saver``: the checkpointer only (the journal
lives in its database); ``postgres``: `PostgresSaver` + `PostgresStore`. Adapters
alternate per round: `ResilientToolNode` in a graph, `ResilientToolsMiddleware` in
`create_agent`, sync and async; the store is given to the adapter as well (``store=``:
its dedup ledger shares the table), as the chaos workers do.
"""

from __future__ import annotations

import asyncio
import json
import os
import traceback
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langchain_resilient_tools import (
    ResilientToolNode,
    ResilientToolsMiddleware,
)
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.support.graphs import tools_graph
from tests.support.storage import pg_connect, pg_options, sqlite_connect, sqlite_store

BACKENDS = ("sqlite_store", "sqlite_saver", "postgres")
ADAPTERS = (("node", "sync"), ("middleware", "sync"), ("node", "async"), ("middleware", "async"))
"""The adapter and mode of round ``r``: ``ADAPTERS[r % 4]``."""
CALL_ID = "call_0"


def email_tool(folder: Path) -> BaseTool:
    def send_email(to: str) -> str:
        """Send an email."""
        line = json.dumps({"to": to, "pid": os.getpid()}) + "\n"
        fd = os.open(folder / "effects.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return f"sent to {to}"

    return StructuredTool.from_function(send_email)


def effects(folder: Path) -> list[int]:
    """The process id of each email sent in the round."""
    path = folder / "effects.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [int(json.loads(line)["pid"]) for line in lines]


@contextmanager
def storage(sc: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """(checkpointer, store or None) of the round, on connections of this process."""
    folder, backend = Path(sc["dir"]), sc["backend"]
    with ExitStack() as stack:
        if backend.startswith("sqlite"):
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite_connect(folder / "checkpoints.db", stack)
            yield SqliteSaver(conn), _sqlite_store(sc, stack)
            return
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        url = sc["pg_url"]
        yield PostgresSaver(pg_connect(url, stack)), PostgresStore(pg_connect(url, stack))


def _sqlite_store(sc: dict[str, Any], stack: ExitStack) -> Any:
    """langgraph's `SqliteStore` on the round's file, opened as its `from_conn_string`
    opens it (``sqlite_store``), or `None`."""
    if sc["backend"] != "sqlite_store":
        return None
    return sqlite_store(Path(sc["dir"]) / "store.db", stack)


@asynccontextmanager
async def astorage(sc: dict[str, Any]) -> AsyncIterator[tuple[Any, Any]]:
    """`storage` for an async run: the async checkpointer (the store stays langgraph's
    sync `SqliteStore` on SQLite, its async one on PostgreSQL)."""
    if sc["backend"].startswith("sqlite"):
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with aiosqlite.connect(Path(sc["dir"]) / "checkpoints.db") as conn:
            with ExitStack() as stack:
                yield AsyncSqliteSaver(conn), _sqlite_store(sc, stack)
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg import AsyncConnection

    kw = pg_options()
    c1 = await AsyncConnection.connect(sc["pg_url"], **kw)
    c2 = await AsyncConnection.connect(sc["pg_url"], **kw)
    async with c1, c2:
        yield AsyncPostgresSaver(c1), AsyncPostgresStore(c2)  # type: ignore[arg-type]


def _model(ai: AIMessage) -> ScriptedChatModel:
    return ScriptedChatModel(script=[ai, AIMessage("done")], per_turn=True)


def build(sc: dict[str, Any], adapter: str, saver: Any, store: Any) -> Any:
    """The round's graph: its tools' step comes after ``interrupt_before``."""
    from langchain.agents import create_agent

    tools = [email_tool(Path(sc["dir"]))]
    ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id=CALL_ID)])
    if adapter == "middleware":
        return create_agent(
            _model(ai), tools=tools, middleware=[ResilientToolsMiddleware(store=store)],
            checkpointer=saver, store=store, interrupt_before=["tools"],
        )  # fmt: skip
    node = ResilientToolNode(tools, store=store)
    return tools_graph(node, checkpointer=saver, store=store, interrupt_before=["tools"])


def _payload(adapter: str) -> dict[str, Any]:
    if adapter == "middleware":
        return {"messages": [HumanMessage("email ann")]}
    ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id=CALL_ID)])
    return {"messages": [ai]}


def answer(state: dict[str, Any]) -> dict[str, Any]:
    """What the caller was told about the email (its `ToolMessage`)."""
    found = [
        m for m in state.get("messages", [])
        if isinstance(m, ToolMessage) and m.tool_call_id == CALL_ID
    ]  # fmt: skip
    if not found:
        return {"status": "none"}
    message = found[-1]
    meta = message.response_metadata.get("resilience") or {}
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    served_by = meta.get("served_by")
    return {
        "status": message.status,
        "content": content,
        "served_by": served_by,
        "pid": os.getpid(),
    }


async def _arun(sc: dict[str, Any], adapter: str, barrier: Any) -> Any:
    async with astorage(sc) as (saver, store):
        app = build(sc, adapter, saver, store)
        await asyncio.to_thread(barrier.wait, 60)
        return await app.ainvoke(None, {"configurable": {"thread_id": sc["thread"]}})


def prepare(sc: dict[str, Any], round_no: int) -> None:
    """Run the round's thread up to its tools' step (in the parent)."""
    adapter = ADAPTERS[round_no % len(ADAPTERS)][0]
    with storage(sc) as (saver, store):
        if store is not None:
            store.setup()
        app = build(sc, adapter, saver, store)
        config = {"configurable": {"thread_id": sc["thread"]}}
        app.invoke(_payload(adapter), config)
        assert app.get_state(config).next == ("tools",)


def resume(sc: dict[str, Any], round_no: int, barrier: Any) -> dict[str, Any]:
    """A worker's part of a round: resume the thread together with the other worker."""
    adapter, mode = ADAPTERS[round_no % len(ADAPTERS)]
    if mode == "async":
        return answer(asyncio.run(_arun(sc, adapter, barrier)))
    with storage(sc) as (saver, store):
        app = build(sc, adapter, saver, store)
        barrier.wait(60)
        return answer(app.invoke(None, {"configurable": {"thread_id": sc["thread"]}}))


def serve(conn: Any, barrier: Any) -> None:
    """A worker: plays each round the parent sends (``None`` ends it)."""
    while True:
        job = conn.recv()
        if job is None:
            return
        sc, round_no = job
        try:
            out = resume(sc, round_no, barrier)
        except Exception:
            out = {"status": "crashed", "error": traceback.format_exc(limit=6)}
            barrier.abort()
        conn.send(out)
