"""The write journal through every adapter, sync and async.

What a worker that died left in the journal is written here by hand (an intent whose
owner is a process that no longer exists, or a receipt), and a fresh graph on the same
checkpointer database runs the call: the decisions are the ones a resume after a real
crash meets (tests/test_crash_safety.py kills real worker processes).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedStore
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import Shared, Timeouts, ToolPolicy, UnknownOutcome, VerifyInfo
from langchain_resilient_tools.core.errors import BackendError
from langchain_resilient_tools.core.idempotency import derive_key
from langchain_resilient_tools.pipeline.journal import logic
from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL, Verdict, judge
from langchain_resilient_tools.runtime import owner
from langchain_resilient_tools.state.backend import MemoryBackend, StoreBackend
from langchain_resilient_tools.state.sqlite import SqliteBackend
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.rewind import rewind
from tests.support.answers import envelope as _envelope
from tests.support.graphs import tools_graph

THREAD = "t-1"


class Outbox:
    """A mail service: each send is one line, under its idempotency key."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, to: str, key: str) -> str:
        self.sent.append(key)
        return f"sent to {to}"

    def lookup(self, info: VerifyInfo) -> str | None:
        return "sent (found by lookup)" if info.idempotency_key in self.sent else None


def send_tool(box: Outbox) -> BaseTool:
    def send_email(to: str, idempotency_key: Annotated[str, InjectedToolArg]) -> str:
        """Send an email."""
        return box.send(to, idempotency_key)

    return StructuredTool.from_function(send_email)


def _snapshot(harness: Harness, graph: Any, config: dict[str, Any]) -> Any:
    if harness.mode == "sync":
        return graph.get_state(config)
    assert harness.loop is not None
    return harness.loop.run_until_complete(graph.aget_state(config))


def _answer(state: Any, call_id: str) -> ToolMessage:
    found = [
        m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    assert found
    return found[-1]  # the answer of this run (an earlier run of the thread left its own)


class Pending:
    """A thread stopped before its tools' step, as a worker that died in that step left it.

    Entries are planted under the key of that step's call (`key`); `resume` then runs the
    step as a resume after a crash does, and `crash` takes the thread back to before the
    step (a later resume then meets what the earlier one left in the journal).
    """

    def __init__(
        self, harness: Harness, tools: list[BaseTool], saver: Any, *,
        policy: ToolPolicy | None = None, call_id: str = "c1", store: Any = None,
        thread: str = THREAD,
    ) -> None:  # fmt: skip
        self.harness, self.tools, self.saver = harness, tools, saver
        self.policy, self.store, self.call_id, self.thread = policy, store, call_id, thread
        self.ai = AIMessage("", tool_calls=[tool_call(tools[0].name, {"to": "ann"}, id=call_id)])
        self.graph = self.build()
        payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else self.ai]}
        config = {"configurable": {"thread_id": thread}}
        harness.invoke(self.graph, payload, config)
        snapshot = _snapshot(harness, self.graph, config)
        assert snapshot.next == ("tools",)
        self.before = snapshot.config
        self.step = f"tools@{snapshot.metadata['step'] + 1}"

    def build(self) -> Any:
        return self.harness.build(
            self.tools, policy=self.policy, checkpointer=self.saver, ai=self.ai,
            store=self.store, interrupt_before=["tools"],
        )  # fmt: skip

    def key(self, tool: str = "send_email") -> str:
        return logic.entry_key(tool, self.idempotency_key(tool), self.step)

    def idempotency_key(self, tool: str = "send_email") -> str:
        """The key the call's service gets: the same whenever the step is resumed."""
        return derive_key(self.thread, tool, self.call_id, self.step)

    def resume(self, *, rebuilt: bool = False) -> ToolMessage:
        """The step run (`rebuilt`: by a new graph and adapters, as a new process)."""
        if rebuilt:
            self.graph = self.build()
        config = {"configurable": {"thread_id": self.thread}}
        return _answer(self.harness.invoke(self.graph, None, config), self.call_id)

    def crash(self) -> None:
        """The worker that ran the step died before the step's checkpoint was saved."""
        rewind(self.saver, self.thread, self.before["configurable"]["checkpoint_id"])


def _run(
    harness: Harness, tools: list[BaseTool], saver: Any, *, policy: ToolPolicy | None = None,
    call_id: str = "c1", store: Any = None, thread: str = THREAD,
) -> ToolMessage:  # fmt: skip
    """A fresh run of the thread: its AIMessage, then its tools' step."""
    ai = AIMessage("", tool_calls=[tool_call(tools[0].name, {"to": "ann"}, id=call_id)])
    graph = harness.build(tools, policy=policy, checkpointer=saver, ai=ai, store=store)
    payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
    state = harness.invoke(graph, payload, {"configurable": {"thread_id": thread}})
    return _answer(state, call_id)


def _dead_owner() -> dict[str, Any]:
    """An owner record of a process of this host that has exited."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {**owner.me(), "pid": int(done.stdout), "start": "1"}


def _entries(path: str) -> dict[str, Any]:
    backend = SqliteBackend(path)
    backend.get(NS_JOURNAL, "")  # its table, if nothing made it yet
    with contextlib.closing(sqlite3.connect(path)) as conn:
        keys = [r[0] for r in conn.execute("SELECT key FROM lrt_state WHERE ns = ?", (NS_JOURNAL,))]
    return {k: backend.get(NS_JOURNAL, k) for k in keys}


# -- pure decisions ------------------------------------------------------------------------


def test_the_owner_record_is_the_forked_childs_own() -> None:
    """`owner.me` is made once per process, and again in the child of a fork (an intent
    the child writes names the child, whose death a resume then sees at once)."""
    import os
    import warnings

    parent = owner.me()
    assert owner.me() == parent and parent["pid"] == os.getpid()
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+: fork() in a process with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: report its record, then leave without cleanup
        os.write(write, json.dumps(owner.me()).encode())
        os._exit(0)
    os.close(write)
    child = json.loads(os.read(read, 4096))
    os.close(read)
    os.waitpid(pid, 0)
    assert child["pid"] == pid and child["pid"] != parent["pid"]
    assert owner.gone(child) and not owner.gone(parent)


def test_judge_reads_each_kind_of_entry() -> None:
    now = 1000.0
    mine = logic.intent("send", {"to": "a"}, owner=owner.me(), now=now, lease=10)
    assert judge(None, now) is Verdict.NEW
    assert judge({"kind": "other"}, now) is Verdict.NEW
    assert judge(mine, now + 1) is Verdict.RUNNING
    assert judge(mine, now + 11) is Verdict.ORPHANED  # its lease ran out
    assert judge(logic.abandoned(mine), now) is Verdict.ORPHANED
    assert judge({**mine, "owner": _dead_owner()}, now) is Verdict.ORPHANED  # gone at once
    elsewhere = {**mine, "owner": {**owner.me(), "host": "other-host", "pid": 1}}
    assert judge(elsewhere, now + 1) is Verdict.RUNNING  # only its lease can tell
    assert judge(logic.receipt(mine, now=now, value="ok"), now) is Verdict.RECEIPT


def test_a_receipt_keeps_a_digest_of_the_arguments_and_a_capped_answer() -> None:
    entry = logic.intent("send", {"to": "secret@x"}, owner=owner.me(), now=1.0, lease=10)
    done = logic.receipt(entry, now=2.0, value="x" * 20000, cap=100)
    assert "secret@x" not in json.dumps(done)
    assert done["outcome"] == "success" and len(done["content"]) < 300
    assert "owner" not in done and "lease_until" not in done


# -- through the adapters --------------------------------------------------------------------


def test_a_healthy_write_leaves_an_intent_then_a_receipt(
    harness: Harness, db: str, saver: Any
) -> None:
    box = Outbox()
    pending = Pending(harness, [send_tool(box)], saver(db))
    answer = pending.resume()
    assert answer.content == "sent to ann" and box.sent
    assert "resilience" not in answer.response_metadata  # a healthy call is ToolNode's
    entry = _entries(db)[pending.key()]
    assert entry["kind"] == "receipt" and entry["outcome"] == "success"
    assert entry["content"] == "sent to ann" and "ann" not in json.dumps(entry["args"])
    assert entry["step"] == pending.step


def _intent(pending: Pending, **changes: Any) -> dict[str, Any]:
    """The intent a dead worker left for the pending step's call."""
    mine = logic.intent(
        "send_email", {"to": "ann"}, owner=_dead_owner(), now=1.0, lease=10, step=pending.step
    )
    return {**mine, **changes}


def test_a_call_with_a_receipt_is_answered_from_it(harness: Harness, db: str, saver: Any) -> None:
    """The worker died after the write answered, before the step's checkpoint."""
    box = Outbox()
    pending = Pending(harness, [send_tool(box)], saver(db))
    done = logic.receipt(_intent(pending), now=2.0, value="sent to ann")
    SqliteBackend(db).put(NS_JOURNAL, pending.key(), done, ttl=600)
    answer = pending.resume()
    assert box.sent == []  # nothing ran
    assert answer.status == "success" and str(answer.content).endswith("sent to ann")
    assert "already ran before the run was resumed" in str(answer.content)
    assert answer.response_metadata["resilience"]["served_by"] == "journal"


def test_a_recorded_failure_is_answered_again(harness: Harness, db: str, saver: Any) -> None:
    box = Outbox()
    pending = Pending(harness, [send_tool(box)], saver(db))
    failure = {
        "error": "tool_error",
        "message": "mailbox full",
        "suggestion": "s",
        "retryable": False,
    }
    done = logic.receipt(_intent(pending), now=2.0, value="")
    SqliteBackend(db).put(
        NS_JOURNAL, pending.key(), {**done, "outcome": "error", "failure": failure}, ttl=600
    )
    body = _envelope(pending.resume())
    assert box.sent == [] and body["error"] == "tool_error" and body["message"] == "mailbox full"


def test_a_receipt_of_other_arguments_answers_nothing(
    harness: Harness, db: str, saver: Any
) -> None:
    """The same step and call id with other arguments (a fork of the thread) is another
    call: it runs, and its own receipt replaces the other one."""
    box = Outbox()
    pending = Pending(harness, [send_tool(box)], saver(db))
    other = logic.intent(
        "send_email", {"to": "bob"}, owner=_dead_owner(), now=1.0, lease=10, step=pending.step
    )
    done = logic.receipt(other, now=2.0, value="sent to bob")
    SqliteBackend(db).put(NS_JOURNAL, pending.key(), done, ttl=600)
    answer = pending.resume()
    assert answer.content == "sent to ann" and len(box.sent) == 1
    assert _entries(db)[pending.key()]["content"] == "sent to ann"


def test_a_fresh_run_of_the_thread_reusing_a_call_id_runs_it(
    harness: Harness, db: str, saver: Any
) -> None:
    """Providers and local models repeat call ids (``call_0`` in every turn): a later run
    of the thread with the same call id and arguments is a new call, not a resume. With
    dedup off it runs; with dedup on, where dedup knows the earlier call (the node's
    ledger in graph state), it is blocked as the repeat it is, and says so: never an
    earlier answer passed off as this call's own."""
    box = Outbox()
    checkpointer = saver(db)
    first = _run(harness, [send_tool(box)], checkpointer, call_id="call_0")
    assert first.content == "sent to ann" and len(box.sent) == 1
    second = _run(harness, [send_tool(box)], checkpointer, call_id="call_0")
    if second.status == "success":
        assert len(box.sent) == 2 and second.content == "sent to ann"  # it ran
    else:
        assert _envelope(second)["error"] == "duplicate_call" and len(box.sent) == 1
    sent = len(box.sent)
    off = ToolPolicy(dedup="off")
    third = _run(harness, [send_tool(box)], checkpointer, call_id="call_0", policy=off)
    assert third.content == "sent to ann" and "resilience" not in third.response_metadata
    assert len(box.sent) == sent + 1
    assert len(_entries(db)) == 3  # one entry per step: none answers another step


def _orphan(db: str, pending: Pending) -> None:
    SqliteBackend(db).put(NS_JOURNAL, pending.key(), _intent(pending), ttl=600)


def test_an_orphaned_write_is_never_run_silently(harness: Harness, db: str, saver: Any) -> None:
    """Its worker died between intent and receipt: whether it sent is unknown."""
    box = Outbox()
    pending = Pending(harness, [send_tool(box)], saver(db))
    _orphan(db, pending)
    body = _envelope(pending.resume())
    assert box.sent == []
    assert body["error"] == "unknown_outcome" and "stopped before it confirmed" in body["message"]
    assert "still running" not in body["message"]
    assert _entries(db)[pending.key()]["kind"] == "receipt"  # a later resume is told the same
    pending.crash()
    again = _envelope(pending.resume())
    assert again["error"] == "unknown_outcome" and box.sent == []


def test_an_orphaned_write_that_verify_finds_is_answered_with_it(
    harness: Harness, db: str, saver: Any
) -> None:
    box = Outbox()
    pending = Pending(
        harness,
        [send_tool(box)],
        saver(db),
        policy=ToolPolicy(unknown_outcome=UnknownOutcome(verify=box.lookup)),
    )
    box.sent.append(pending.idempotency_key())  # it had been sent
    _orphan(db, pending)
    answer = pending.resume()
    assert answer.status == "success" and "sent (found by lookup)" in str(answer.content)
    assert answer.response_metadata["resilience"]["served_by"] == "verify"
    assert len(box.sent) == 1


def test_an_orphaned_write_that_verify_does_not_find_runs_once(
    harness: Harness, db: str, saver: Any
) -> None:
    box = Outbox()
    pending = Pending(
        harness,
        [send_tool(box)],
        saver(db),
        policy=ToolPolicy(unknown_outcome=UnknownOutcome(verify=box.lookup)),
    )
    _orphan(db, pending)
    answer = pending.resume()
    assert answer.status == "success" and str(answer.content).endswith("sent to ann")
    assert box.sent == [pending.idempotency_key()]  # once, with the same key
    assert _entries(db)[pending.key()]["outcome"] == "success"


def test_a_keyed_write_is_sent_again_with_its_key(harness: Harness, db: str, saver: Any) -> None:
    box = Outbox()
    policy = ToolPolicy(idempotency_key=True)
    pending = Pending(harness, [send_tool(box)], saver(db), policy=policy)
    _orphan(db, pending)
    answer = pending.resume()
    assert str(answer.content).endswith("sent to ann")
    assert "sent again with the same idempotency key" in str(answer.content)
    assert box.sent == [pending.idempotency_key()]


def test_a_write_another_live_worker_runs_is_waited_for(
    harness: Harness, db: str, saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica (alive: this very process) runs it; its receipt lands while this
    call polls for it (the third poll's wait writes it: no real sleep)."""
    from types import SimpleNamespace

    from langchain_resilient_tools.pipeline.journal import entry

    box = Outbox()
    pending = Pending(
        harness, [send_tool(box)], saver(db), policy=ToolPolicy(timeouts=Timeouts(deadline=5))
    )
    backend = SqliteBackend(db)
    theirs = _intent(pending, owner=owner.me(), started=backend.clock())
    theirs["lease_until"] = backend.clock() + 60
    backend.put(NS_JOURNAL, pending.key(), theirs, ttl=600)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            done = logic.receipt(theirs, now=1.0, value="sent to ann")
            backend.put(NS_JOURNAL, pending.key(), done, ttl=600)

    monkeypatch.setattr(entry, "testing", SimpleNamespace(sleep=sleep))
    answer = pending.resume()
    assert box.sent == [] and answer.status == "success" and len(waits) == 3
    assert str(answer.content).endswith("sent to ann")


def test_a_write_still_running_elsewhere_past_the_deadline_is_unknown(
    harness: Harness, db: str, saver: Any
) -> None:
    box = Outbox()
    pending = Pending(
        harness, [send_tool(box)], saver(db), policy=ToolPolicy(timeouts=Timeouts(deadline=0.3))
    )
    backend = SqliteBackend(db)
    theirs = _intent(pending, owner=owner.me(), started=backend.clock())
    theirs["lease_until"] = backend.clock() + 60
    backend.put(NS_JOURNAL, pending.key(), theirs, ttl=600)
    body = _envelope(pending.resume())
    assert box.sent == [] and body["error"] == "unknown_outcome"
    assert "still being run" in body["message"]
    assert _entries(db)[pending.key()]["kind"] == "intent"  # theirs to finish


def _note_tool(saved: list[str]) -> BaseTool:
    def save_note(text: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
        """Save a note."""
        store.put(("notes",), str(len(saved)), {"text": text})
        saved.append(text)
        return f"saved {text}"

    return StructuredTool.from_function(save_note)


@pytest.mark.parametrize("thread", [None, "t-nockpt"])
def test_without_a_checkpointer_every_run_runs_its_write(
    harness: Harness, thread: str | None
) -> None:
    """A graph with a store and no checkpointer (LangGraph's own
    ``test_tool_node_inject_store``): nothing can resume its runs, so two runs that
    reuse a call id are two calls; both writes happen, and no journal entry is kept."""
    store, saved = InMemoryStore(), []
    tool = _note_tool(saved)
    ai = AIMessage("", tool_calls=[tool_call("save_note", {"text": "hi"}, id="call_0")])
    config = {"configurable": {"thread_id": thread}} if thread else None
    for run in (1, 2):
        # Dedup (on by default) is left out: a second identical write on one thread is
        # its to block, and this test is about the journal.
        policy = ToolPolicy(dedup="off") if thread else None
        graph = harness.build([tool], policy=policy, ai=ai, store=store)
        payload = {"messages": [HumanMessage("go") if harness.adapter == "middleware" else ai]}
        answer = _answer(harness.invoke(graph, payload, config), "call_0")
        assert answer.content == "saved hi" and len(saved) == run, answer.content
        assert "resilience" not in answer.response_metadata
    assert store.search(("langchain_resilient_tools", NS_JOURNAL)) == []


def test_reads_and_unjournaled_writes_leave_nothing(harness: Harness, db: str, saver: Any) -> None:
    box = Outbox()
    _run(harness, [send_tool(box)], saver(db), policy=ToolPolicy(journal=False))

    def get_inbox(to: str) -> str:
        """Read an inbox."""
        return f"inbox of {to}"

    _run(harness, [StructuredTool.from_function(get_inbox)], saver(db), call_id="r1")
    assert _entries(db) == {}


def test_the_store_is_used_when_durable_else_the_checkpointer(
    harness: Harness, db: str, saver: Any
) -> None:
    """An InMemoryStore would be lost with the process: the SQLite checkpointer's database
    keeps the journal instead."""
    box = Outbox()
    pending = Pending(harness, [send_tool(box)], saver(db), store=InMemoryStore())
    pending.resume()
    assert pending.key() in _entries(db)


def test_an_in_memory_checkpointer_keeps_the_journal_in_memory(harness: Harness) -> None:
    """The step resumed by a rebuilt graph on the same `InMemorySaver` in the same process
    (a new node or middleware) finds the receipt: the same call is not sent again."""
    box = Outbox()
    pending = Pending(harness, [send_tool(box)], InMemorySaver(), thread="mem")
    pending.resume()
    pending.crash()
    again = pending.resume(rebuilt=True)
    assert len(box.sent) == 1
    assert again.response_metadata["resilience"]["served_by"] == "journal"


class Failing(MemoryBackend):
    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        raise BackendError("unreachable")


def test_a_journal_on_the_adapters_store_that_fails_does_not_run_the_write(
    harness: Harness,
) -> None:
    """Whatever ``on_error`` says (tests/test_journal_unreadable.py: every adapter)."""
    if harness.adapter != "node":
        pytest.skip("the adapter's store= is the node's here")

    from langchain_resilient_tools import ResilientToolNode

    box = Outbox()
    for mode in ("closed", "open"):
        box.sent.clear()
        policy = ToolPolicy(dedup="off", shared=Shared(on_error=mode))  # type: ignore[arg-type]
        node = ResilientToolNode([send_tool(box)], policy=policy, store=Failing())
        app = tools_graph(node, checkpointer=InMemorySaver())
        ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c1")])
        state = harness.invoke(app, {"messages": [ai]}, {"configurable": {"thread_id": mode}})
        answer = state["messages"][-1]
        assert box.sent == [], mode
        assert _envelope(answer)["error"] == "unknown_outcome"


class Counting(StoreBackend):
    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.ops = 0

    def get(self, ns: str, key: str) -> Any:
        self.ops += ns == NS_JOURNAL
        return super().get(ns, key)

    def put(self, ns: str, key: str, value: Any, *, ttl: float) -> None:
        self.ops += ns == NS_JOURNAL
        super().put(ns, key, value, ttl=ttl)

    def claim(self, ns: str, key: str, value: Any, *, ttl: float) -> bool:
        self.ops += ns == NS_JOURNAL
        return super().claim(ns, key, value, ttl=ttl)


def test_a_healthy_write_costs_two_journal_round_trips(
    harness: Harness, db: str, saver: Any
) -> None:
    if harness.adapter != "node":
        pytest.skip("counted on the node's store=")

    from langchain_resilient_tools import ResilientToolNode

    counting = Counting(InMemoryStore())
    counting.store.supports_ttl  # noqa: B018 - a real store underneath
    box = Outbox()
    node = ResilientToolNode([send_tool(box)], store=counting)
    app = tools_graph(node, checkpointer=InMemorySaver())
    ai = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c1")])
    harness.invoke(app, {"messages": [ai]}, {"configurable": {"thread_id": "x"}})
    assert counting.ops == 2 and len(box.sent) == 1


# -- a pending dedup entry of a worker that died ---------------------------------------------


def _dedup_key(tool: BaseTool, call_id: str = "c1") -> str:
    from langchain_resilient_tools.core.key import call_key
    from langchain_resilient_tools.core.policy import PolicyResolver
    from langchain_resilient_tools.pipeline.dedup.shared import _ledger_key
    from langchain_resilient_tools.pipeline.driver import Pipeline

    call = Pipeline(PolicyResolver(None)).new_call(
        call_id=call_id, name=tool.name, args={"to": "ann"}, tool=tool, thread_id=THREAD
    )
    return _ledger_key(call, call_key(call))


def _dead_pending(store: Any, tool: BaseTool, call_id: str = "c1") -> None:
    from langchain_resilient_tools.pipeline.dedup.logic import Entry

    entry = Entry("pending", at=1.0, call_id=call_id).persisted(tool.name)
    data = {**entry, "owner": _dead_owner(), "lease_until": 1e12}
    StoreBackend(store).put("dedup", _dedup_key(tool, call_id), data, ttl=600)


def test_a_dead_workers_pending_write_is_never_called_still_running(harness: Harness) -> None:
    """A shared store holds the dedup entry and the journal intent of a worker that died
    mid-write: the resumed call is told the outcome is unknown, never "still running";
    a second identical call is blocked as unknown, not as in flight."""
    box = Outbox()
    tool = send_tool(box)
    store = InMemoryStore()
    _dead_pending(store, tool)
    policy = ToolPolicy(shared=Shared(backend="store"))
    pending = Pending(harness, [tool], InMemorySaver(), store=store, policy=policy)
    StoreBackend(store).put(NS_JOURNAL, pending.key(), _intent(pending), ttl=600)
    body = _envelope(pending.resume())
    assert box.sent == [] and body["error"] == "unknown_outcome"
    assert "still" not in body["message"]
    again = _envelope(
        _run(harness, [tool], InMemorySaver(), store=store, policy=policy, call_id="c2")
    )
    assert box.sent == [] and again["error"] == "duplicate_call"
    assert "in flight" not in again["message"] and "still running" not in again["message"]


def test_a_dead_workers_pending_write_that_verify_does_not_find_runs_once(
    harness: Harness,
) -> None:
    box = Outbox()
    tool = send_tool(box)
    store = InMemoryStore()
    _dead_pending(store, tool)
    policy = ToolPolicy(
        shared=Shared(backend="store"), unknown_outcome=UnknownOutcome(verify=box.lookup)
    )
    pending = Pending(harness, [tool], InMemorySaver(), store=store, policy=policy)
    StoreBackend(store).put(NS_JOURNAL, pending.key(), _intent(pending), ttl=600)
    answer = pending.resume()
    assert answer.status == "success" and len(box.sent) == 1


def test_a_dead_workers_pending_read_runs(harness: Harness) -> None:
    def get_inbox(to: str) -> str:
        """Read an inbox."""
        return f"inbox of {to}"

    tool = StructuredTool.from_function(get_inbox)
    store = InMemoryStore()
    _dead_pending(store, tool)
    answer = _run(
        harness,
        [tool],
        InMemorySaver(),
        store=store,
        policy=ToolPolicy(shared=Shared(backend="store")),
    )
    assert answer.content == "inbox of ann"
