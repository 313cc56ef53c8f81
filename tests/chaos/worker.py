"""One worker process of the crash-safety harness: builds a graph and runs one thread.

A worker builds the graph of one configuration (`CONFIGS`) on durable storage
(`STORAGES`: SQLite or PostgreSQL, with a store or with a checkpointer only), runs the
thread of its scenario, and writes what the model was told to ``report.json``. The
graph: a scripted model that sends two emails in one step (``call-1``, ``call-2``), the
tools, then the model again ("done").

The write tool, `send_email`, appends one line per email sent to ``outbox.jsonl`` (the
effect the harness counts) and fsyncs it. The `verify` lookup reads that outbox by
idempotency key and logs each lookup to ``verify.jsonl``. A person asked about an
unknown outcome (``unknown_outcome="interrupt"``) looks at the outbox too: "done"
if the email is there, else "run it again"; each decision goes to ``person.jsonl``.

Kill points (`POINTS`): the worker SIGKILLs itself (a real kill) at the point its
scenario names, once, in the first process of a scenario only:

- ``before_first_checkpoint``: in the saver's first ``put`` (the input is never saved);
- ``before_tool``: in the tool, before the email is sent;
- ``after_effect``: in the tool, after the email is sent, before it returns;
- ``after_return``: the tools returned, their answers not saved (the saver's
  ``put_writes`` of an answer, before it writes);
- ``during_checkpoint``: the step's answers saved as pending writes, the step's
  checkpoint not (right after that ``put_writes``);
- ``after_checkpoint``: right after the checkpoint that follows the tools' answers;
- ``stop_after_effect``: SIGSTOPs itself after the effect instead (a hung replica).

A scenario's ``lease_s`` sets the journal's lease (the default policy's 10 s otherwise):
the harness shortens it where a resume waits it out (a hung replica).

Then a fresh process resumes (``role="resume"``): ``app.invoke(None, config)``, or the
input again when no checkpoint of the thread was saved.

Run by the harness (`tests.chaos.harness`, under a multiprocessing forkserver that has
imported this module once) or by hand::

    python -m tests.chaos.worker '{"config": "node", "storage": "sqlite", "dir": "/tmp/x",
                                   "thread_id": "t1", "kill": "after_effect"}' [resume]
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolArg, InjectedToolCallId, StructuredTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from langchain_resilient_tools import (
    Journal,
    ResilientToolNode,
    ResilientToolsMiddleware,
    ResilientToolsState,
    ToolPolicy,
    UnknownOutcome,
    VerifyInfo,
)
from langchain_resilient_tools.state.sqlite import SqliteBackend
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.support.storage import pg_connect, sqlite_connect, sqlite_store

CONFIGS: tuple[str, ...] = (
    "toolnode",
    "toolnode_retry",
    "node",
    "node_verify",
    "node_interrupt",
    "middleware",
    "middleware_verify",
)
"""``toolnode``: plain `ToolNode`; ``toolnode_retry``: `create_agent` with
`ToolRetryMiddleware` (the baselines). ``node*``: `ResilientToolNode` with the default
policy, ``UnknownOutcome(verify=...)`` set, ``unknown_outcome="interrupt"``; ``middleware*``:
`create_agent` with `ResilientToolsMiddleware`, default policy and ``verify=``."""

BASELINES: tuple[str, ...] = ("toolnode", "toolnode_retry")

STORAGES: tuple[str, ...] = ("sqlite", "sqlite_nostore", "postgres", "postgres_nostore")
"""Checkpointer and store: SQLite (`SqliteSaver` + `SqliteStore`), PostgreSQL
(`PostgresSaver` + `PostgresStore`); ``*_nostore``: the checkpointer only."""

POINTS: tuple[str, ...] = (
    "before_first_checkpoint",
    "before_tool",
    "after_effect",
    "after_return",
    "during_checkpoint",
    "after_checkpoint",
)
"""Kill points the worker reaches itself (see the module docstring)."""

CALLS = (("call-1", "alice@example.com"), ("call-2", "bob@example.com"))
"""The model's one step of writes: (tool call id, recipient)."""

_kill: str | None = None
"""This process's kill point (set once per process by `run`)."""
_locks: list[Any] = []
"""The locks of this process's saver and store (set by `run`); see `writers`."""
STOP_LOCK_S = 60.0
"""Longest a worker that hangs itself waits for a write in flight to end."""
STOP_FAILED = 75
"""Exit code of a worker that could not hang outside every write (the harness reports it)."""


def writers() -> list[Any]:
    """The locks every SQLite write of this process runs under: the saver's, the
    store's, and those of the package's own backends on the same files (the journal's and
    the dedup ledger's `SqliteBackend`, which runs each statement under its lock; they
    write on other threads while a tool runs: the journal's lease renewals, another
    call's receipt).

    A worker that hangs itself holds them all first, so that it never hangs in the middle
    of a write: a stopped process in a write keeps the file's write lock, and every other
    worker's writes then wait for it (the resume's journal waited out the call's deadline
    and answered ``timeout``), which is not what the replica scenario is about."""
    backends = [o for o in gc.get_objects() if isinstance(o, SqliteBackend)]
    return [*_locks, *(b._lock for b in backends)]


def reach(point: str) -> None:
    """Die here (SIGKILL), or hang (SIGSTOP), if this is this process's kill point."""
    global _kill
    if _kill is None:
        return
    if _kill == point:
        _kill = None
        os.kill(os.getpid(), signal.SIGKILL)
    elif _kill == f"stop_{point}":
        _kill = None
        for lock in writers():
            if not lock.acquire(timeout=STOP_LOCK_S):
                os._exit(STOP_FAILED)
        os.kill(os.getpid(), signal.SIGSTOP)


# -- the effect, the lookup, the person ------------------------------------------------


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, on disk before this returns."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def email_tool(folder: Path, delay: float) -> BaseTool:
    outbox = folder / "outbox.jsonl"

    def send_email(
        to: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        idempotency_key: Annotated[str | None, InjectedToolArg] = None,
    ) -> str:
        """Send an email."""
        reach("before_tool")
        time.sleep(delay)
        sent = {"call_id": tool_call_id, "key": idempotency_key, "to": to, "pid": os.getpid()}
        append_line(outbox, sent)
        reach("after_effect")
        time.sleep(delay)
        return f"sent to {to}"

    return StructuredTool.from_function(send_email)


def lookup(folder: Path) -> Callable[[VerifyInfo], str | None]:
    """The `verify` lookup: the outbox, by idempotency key."""

    def verify(info: VerifyInfo) -> str | None:
        found = [r for r in read_lines(folder / "outbox.jsonl") if r["key"] == info.idempotency_key]
        append_line(
            folder / "verify.jsonl",
            {"call_id": info.tool_call_id, "key": info.idempotency_key, "found": bool(found)},
        )
        return f"sent to {found[0]['to']}" if found else None

    return verify


def decide(folder: Path, review: dict[str, Any]) -> dict[str, Any]:
    """What a person answers about an unknown outcome: they look at the outbox."""
    sent = [
        r for r in read_lines(folder / "outbox.jsonl") if r["call_id"] == review["tool_call_id"]
    ]
    choice = "done" if sent else "run_again"
    append_line(folder / "person.jsonl", {"call_id": review["tool_call_id"], "choice": choice})
    if sent:
        return {"choice": "done", "result": f"sent to {sent[0]['to']}"}
    return {"choice": "run_again"}


# -- the model --------------------------------------------------------------------------


def model() -> ScriptedChatModel:
    calls = [tool_call("send_email", {"to": to}, id=cid) for cid, to in CALLS]
    # per turn: the n-th model call after the user's message gets the n-th scripted
    # message, so a fresh process that resumes the thread carries on where the dead one
    # stopped.
    return ScriptedChatModel(
        script=[AIMessage("", tool_calls=calls), AIMessage("done")], per_turn=True
    )


# -- storage: savers that kill at a point of the checkpoint write ----------------------


def _has_answer(value: Any) -> bool:
    if isinstance(value, ToolMessage):
        return True
    if isinstance(value, Command):
        return _has_answer(value.update)
    if isinstance(value, (list, tuple)):
        return any(_has_answer(v) for v in value)
    if isinstance(value, dict):
        return any(_has_answer(v) for v in value.values())
    return False


class _Killing:
    """Mixin over a sync checkpoint saver: reaches the checkpoint kill points."""

    _puts = 0
    _answers_saved = False

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self._puts += 1
        if self._puts == 1:
            reach("before_first_checkpoint")
        out = super().put(config, checkpoint, metadata, new_versions)  # type: ignore[misc]
        # LangGraph saves a step's writes and its checkpoint on background threads, in
        # no set order: the checkpoint that follows the answers holds them itself.
        if self._answers_saved or _has_answer(checkpoint.get("channel_values")):
            reach("after_checkpoint")
        return out

    def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:  # fmt: skip
        answers = any(_has_answer(v) for _, v in writes)
        if answers:
            reach("after_return")
        super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]
        if answers:
            self._answers_saved = True
            reach("during_checkpoint")


class KillingSqliteSaver(_Killing, SqliteSaver):
    pass


def _postgres_saver() -> type:
    from langgraph.checkpoint.postgres import PostgresSaver

    return type("KillingPostgresSaver", (_Killing, PostgresSaver), {})


@contextmanager
def storage(sc: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """(checkpointer, store or None) of the scenario; connections closed on exit."""
    kind, folder = sc["storage"], Path(sc["dir"])
    with ExitStack() as stack:
        if kind.startswith("sqlite"):
            conn = sqlite_connect(folder / "checkpoints.db", stack, timeout=30)
            saver: Any = KillingSqliteSaver(conn)
            store: Any = None
            if kind == "sqlite":
                store = sqlite_store(folder / "store.db", stack, timeout=30)
                store.setup()
        else:
            from langgraph.store.postgres import PostgresStore

            saver = _postgres_saver()(pg_connect(sc["pg_url"], stack))
            store = PostgresStore(pg_connect(sc["pg_url"], stack)) if kind == "postgres" else None
        yield saver, store


def setup_postgres(url: str) -> None:
    """LangGraph's tables for the PostgreSQL scenarios (once per database)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    with pg_connect(url) as c:
        PostgresSaver(c).setup()  # type: ignore[arg-type]
        PostgresStore(c).setup()  # type: ignore[arg-type]


# -- the graph ----------------------------------------------------------------------------


def policy_of(config: str, folder: Path, lease_s: float | None = None) -> ToolPolicy | None:
    """The configuration's policy; `lease_s` shortens the journal's lease (the default
    policy otherwise)."""
    options: dict[str, Any] = {} if lease_s is None else {"journal": Journal(lease_s=lease_s)}
    if config.endswith("_verify"):
        return ToolPolicy(unknown_outcome=UnknownOutcome(verify=lookup(folder)), **options)
    if config.endswith("_interrupt"):
        return ToolPolicy(unknown_outcome="interrupt", **options)
    return ToolPolicy(**options) if options else None


def build(sc: dict[str, Any], saver: Any, store: Any) -> Any:
    config, folder, lease = sc["config"], Path(sc["dir"]), sc.get("lease_s")
    tools = [email_tool(folder, sc.get("tool_delay", 0.01))]
    if config == "toolnode_retry" or config.startswith("middleware"):
        middleware: Any = (
            ToolRetryMiddleware()
            if config == "toolnode_retry"
            else ResilientToolsMiddleware(policy=policy_of(config, folder, lease), store=store)
        )
        return create_agent(
            model(), tools=tools, middleware=[middleware], checkpointer=saver, store=store
        )
    llm = model()
    if config == "toolnode":
        node: Any = ToolNode(tools)
    else:
        node = ResilientToolNode(tools, policy=policy_of(config, folder, lease), store=store)

    def call_model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(ResilientToolsState)
    graph.add_node("model", call_model)
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver, store=store)


# -- one process's run --------------------------------------------------------------------


def _message(m: BaseMessage) -> dict[str, Any]:
    if isinstance(m, AIMessage):
        return {"type": "ai", "tool_calls": [c["id"] for c in m.tool_calls]}
    if isinstance(m, ToolMessage):
        return {
            "type": "tool",
            "tool_call_id": m.tool_call_id,
            "status": m.status,
            "content": m.content if isinstance(m.content, str) else json.dumps(m.content),
            "resilience": m.response_metadata.get("resilience"),
        }
    return {"type": m.type}


def _drive(app: Any, payload: Any, config: Any, folder: Path) -> None:
    """Run the thread to its end, answering a person's questions as they come."""
    app.invoke(payload, config)
    for _ in range(10):
        interrupts = app.get_state(config).interrupts
        if not interrupts:
            return
        app.invoke(Command(resume={i.id: decide(folder, i.value) for i in interrupts}), config)


def run(sc: dict[str, Any], role: str = "first", ready: Any = None) -> dict[str, Any]:
    """Run the scenario's thread in this process; returns (and writes) the report.

    ``role="first"`` starts the thread with the scenario's kill point armed;
    ``"resume"`` carries it on (or sends the input again if nothing was saved).
    `ready` (a multiprocessing connection) is told when the graph is about to run.
    """
    global _kill
    _kill = sc.get("kill") if role == "first" else None
    folder = Path(sc["dir"])
    config: Any = {"configurable": {"thread_id": sc["thread_id"]}}
    report: dict[str, Any] = {"role": role, "pid": os.getpid(), "resent_input": False}
    start = time.perf_counter()
    try:
        with storage(sc) as (saver, store):
            _locks[:] = [x.lock for x in (saver, store) if x is not None]
            app = build(sc, saver, store)
            saved = saver.get_tuple(config) is not None
            payload = None if saved else {"messages": [HumanMessage("email alice and bob")]}
            report["resent_input"] = role != "first" and not saved
            if ready is not None:
                ready.send(("ready", os.getpid()))
            _drive(app, payload, config, folder)
            state = app.get_state(config)
            report["messages"] = [_message(m) for m in state.values.get("messages", [])]
            report["next"] = list(state.next)
    except Exception:
        report["error"] = traceback.format_exc(limit=8)
    report["seconds"] = time.perf_counter() - start
    append_line(folder / f"report-{role}.jsonl", report)
    if ready is not None:
        ready.send(("done", report["seconds"]))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__)
        return 2
    report = run(json.loads(args[0]), args[1] if len(args) > 1 else "first")
    print(json.dumps(report, indent=1))
    return 1 if "error" in report else 0


if __name__ == "__main__":
    raise SystemExit(main())
