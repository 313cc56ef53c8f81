"""Safe is not stuck (DESIGN invariants 16 and 17), through every adapter, sync and async.

An agent that does what the error envelope advises finishes its job: a write whose
request never left is retried like a read; after an unknown outcome the envelope names
the read that shows whether the write took effect, and the same write sent again after
that answer runs (with the first call's idempotency key), while a repeat of a write that
succeeded stays blocked; a read after a write runs again instead of being reused.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_resilient_tools import ResilientToolNode, ToolPolicy, UnknownOutcome, set_testing
from langchain_resilient_tools.testing import ServiceRefused, tool_call
from tests.conftest import Harness
from tests.support.answers import envelope
from tests.support.graphs import tools_graph


class ConnectTimeout(Exception):
    """Named as httpx's and requests' connect timeouts are (matched by class name)."""


class Orders:
    """A tiny order service: `get_order_details` and `cancel_pending_order`, whose next
    runs fail as `plan` says (``before``: raised before the effect; ``after``: raised
    after it, the reply lost)."""

    def __init__(self) -> None:
        self.status = {"W1": "pending"}
        self.effects: list[str] = []
        self.keys: list[str] = []
        self.plan: list[tuple[str, BaseException]] = []
        self.lock = threading.Lock()

    def tools(self) -> list[BaseTool]:
        def get_order_details(order_id: str) -> str:
            """The status of an order."""
            return json.dumps({"order_id": order_id, "status": self.status[order_id]})

        def cancel_pending_order(
            order_id: str, reason: str, idempotency_key: Annotated[str, InjectedToolArg] = ""
        ) -> str:
            """Cancel a pending order."""
            with self.lock:
                self.keys.append(idempotency_key)
                when, exc = self.plan.pop(0) if self.plan else ("", None)
            if when == "before" and exc is not None:
                raise exc
            self.status[order_id] = "cancelled"
            self.effects.append(order_id)
            if exc is not None:
                raise exc
            return f"order {order_id} cancelled"

        return [
            StructuredTool.from_function(get_order_details),
            StructuredTool.from_function(cancel_pending_order),
        ]


def _refused_by_requests() -> BaseException:
    """A ``requests.ConnectionError``-like error wrapping a refused connection."""
    outer = ConnectionError("Max retries exceeded")
    outer.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return outer


NEVER_SENT = {
    "refused": lambda: ConnectionRefusedError(111, "Connection refused"),
    "dns": lambda: socket.gaierror(-2, "Name or service not known"),
    "connect_timeout": lambda: ConnectTimeout("timed out while connecting"),
    "wrapped_refusal": _refused_by_requests,
    "rate_limited": lambda: ServiceRefused(429, retry_after=0.01),
    "unavailable_retry_after": lambda: ServiceRefused(503, retry_after=0.01),
}

CANCEL = {"order_id": "W1", "reason": "no longer needed"}


@pytest.mark.parametrize("fault", sorted(NEVER_SENT))
def test_a_write_whose_request_never_left_is_retried(harness: Harness, fault: str) -> None:
    orders = Orders()
    orders.plan = [("before", NEVER_SENT[fault]())]
    result = harness.run(
        orders.tools(),
        [tool_call("cancel_pending_order", CANCEL, id="c1")],
        config={"configurable": {"thread_id": f"never-sent-{fault}"}},
    )
    assert result["c1"].status == "success", result["c1"].content
    assert orders.effects == ["W1"]  # carried out once
    assert len(orders.keys) == 2 and orders.keys[0] == orders.keys[1]  # the same request


@pytest.mark.parametrize(
    "exc",
    [ConnectionResetError(104, "Connection reset by peer"), ServiceRefused(503, retry_after=0)],
    ids=["reset", "503_without_retry_after"],
)
def test_an_ambiguous_failure_of_a_write_stays_unknown(
    harness: Harness, exc: BaseException
) -> None:
    orders = Orders()
    if isinstance(exc, ServiceRefused):
        exc.headers = {}  # no Retry-After: maybe half done
        exc.retry_after = None  # type: ignore[assignment]
    orders.plan = [("after", exc)]
    result = harness.run(
        orders.tools(),
        [tool_call("cancel_pending_order", CANCEL, id="c1")],
        config={"configurable": {"thread_id": f"ambiguous-{type(exc).__name__}"}},
    )
    data = envelope(result["c1"])
    assert data["error"] == "unknown_outcome" and data["retryable"] is False
    assert "was not sent again" in data["message"]
    assert orders.effects == ["W1"] and len(orders.keys) == 1  # never sent twice


def test_checking_then_sending_the_write_again_finishes_the_job(harness: Harness) -> None:
    """The sequence that left agents stuck: cancel -> unknown_outcome; read the order
    (still pending); cancel again -> it runs, as the same request; cancel once more ->
    blocked, since it succeeded."""
    orders = Orders()
    orders.plan = [("before", ConnectionResetError(104, "Connection reset by peer"))]
    turns = [
        [tool_call("cancel_pending_order", CANCEL, id="a1")],
        [tool_call("get_order_details", {"order_id": "W1"}, id="a2")],
        [tool_call("cancel_pending_order", CANCEL, id="a3")],
        [tool_call("cancel_pending_order", CANCEL, id="a4")],
    ]
    results = harness.run_turns(orders.tools(), turns, thread_id=f"check-{harness.mode}")
    first = envelope(results[0]["a1"])
    assert first["error"] == "unknown_outcome"
    assert "send this same call" in first["suggestion"]
    if harness.adapter != "tool":  # a tool wrapped on its own does not know its siblings
        assert first["check"] == {"tool": "get_order_details", "args": {"order_id": "W1"}}
        assert 'get_order_details(order_id="W1")' in first["suggestion"]
    assert json.loads(results[1]["a2"].content)["status"] == "pending"
    assert results[2]["a3"].status == "success", results[2]["a3"].content
    assert orders.effects == ["W1"]
    assert len(orders.keys) == 2 and orders.keys[0] == orders.keys[1]  # same idempotency key
    assert envelope(results[3]["a4"])["error"] == "duplicate_call"
    assert orders.effects == ["W1"]


def test_a_read_after_a_write_in_the_thread_runs_again(harness: Harness) -> None:
    orders = Orders()
    read = {"order_id": "W1"}
    turns = [
        [tool_call("get_order_details", read, id="r1")],
        [tool_call("cancel_pending_order", CANCEL, id="w1")],
        [tool_call("get_order_details", read, id="r2")],
        [tool_call("get_order_details", read, id="r3")],
    ]
    results = harness.run_turns(orders.tools(), turns, thread_id=f"fresh-{harness.mode}")
    assert json.loads(results[0]["r1"].content)["status"] == "pending"
    assert results[1]["w1"].status == "success"
    second = results[2]["r2"]
    assert json.loads(second.content)["status"] == "cancelled"  # not the reading before
    assert "resilience" not in second.response_metadata  # it ran: a healthy call
    third = results[3]["r3"]
    assert "cancelled" in str(third.content)  # between writes, still reused
    assert third.response_metadata["resilience"]["served_by"] == "dedup"


def test_a_verified_rerun_backs_off_and_says_it_ran_twice(harness: Harness) -> None:
    orders = Orders()
    reset = ConnectionResetError(104, "Connection reset by peer")
    orders.plan = [("before", reset), ("before", ConnectionResetError(104, "reset again"))]
    policy = ToolPolicy(unknown_outcome=UnknownOutcome(verify=lambda info: None))
    with set_testing(True) as t:
        result = harness.run(
            orders.tools(),
            [tool_call("cancel_pending_order", CANCEL, id="v1")],
            policies={"cancel_pending_order": policy},
            config={"configurable": {"thread_id": f"verify-{harness.mode}"}},
        )
    data = envelope(result["v1"])
    assert data["error"] == "unknown_outcome"
    assert "twice" in data["message"] and "not sent a third time" in data["message"]
    assert "ConnectionResetError" in data["message"] and "ToolRaised" not in data["message"]
    assert "not repeated" not in data["message"]
    assert len(orders.keys) == 2 and not orders.effects
    assert len(t.sleeps) == 1 and t.sleeps[0] >= 0.5  # the retry policy's first backoff


def test_a_verified_rerun_that_succeeds_says_it_was_sent_once_more(harness: Harness) -> None:
    orders = Orders()
    orders.plan = [("before", ConnectionResetError(104, "Connection reset by peer"))]
    policy = ToolPolicy(unknown_outcome=UnknownOutcome(verify=lambda info: None))
    with set_testing(True):
        result = harness.run(
            orders.tools(),
            [tool_call("cancel_pending_order", CANCEL, id="v2")],
            policies={"cancel_pending_order": policy},
            config={"configurable": {"thread_id": f"verify-ok-{harness.mode}"}},
        )
    message = result["v2"]
    assert message.status == "success"
    assert "sent once more" in str(message.content) and "ConnectionResetError" in str(
        message.content
    )
    assert orders.effects == ["W1"]


def test_a_read_after_a_write_in_another_worker_runs_again() -> None:
    """Two workers share dedup through a store: a write that took effect in one makes the
    other's reused read of the thread stale, though that worker counted no write itself."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import MessagesState
    from langgraph.store.memory import InMemoryStore

    from langchain_resilient_tools import ResilientToolNode
    from langchain_resilient_tools.core import freshness

    store, orders = InMemoryStore(), Orders()

    def worker() -> Any:
        return tools_graph(ResilientToolNode(orders.tools(), store=store), MessagesState)

    one, two = worker(), worker()
    config = {"configurable": {"thread_id": "two-workers"}}

    def send(app: Any, name: str, args: dict[str, Any], call_id: str) -> Any:
        ai = AIMessage("", tool_calls=[tool_call(name, args, id=call_id)])
        return app.invoke({"messages": [ai]}, config)["messages"][-1]

    assert "pending" in send(one, "get_order_details", {"order_id": "W1"}, "r1").content
    assert send(two, "cancel_pending_order", CANCEL, "w1").status == "success"
    freshness._epochs.clear()  # worker one is another process: it counted no write
    again = send(one, "get_order_details", {"order_id": "W1"}, "r2")
    assert json.loads(again.content)["status"] == "cancelled"


def test_a_write_sent_again_while_its_timed_out_attempt_still_runs_waits_for_it(
    harness: Harness,
) -> None:
    """A sync write that timed out runs on in its thread and may yet take effect: the
    model told ``unknown_outcome`` checks too early (nothing yet) and sends it again. The
    re-send waits for the first attempt; it took effect, so the re-send is answered with
    its result (not run again), and a repeat after that is blocked: the write happened
    once."""
    orders = Orders()
    release = harness.hang_event()
    effects: list[str] = []

    def cancel_pending_order(order_id: str, reason: str) -> str:
        """Cancel a pending order."""
        release.wait(10)
        effects.append(order_id)
        return f"order {order_id} cancelled"

    tools = [orders.tools()[0], StructuredTool.from_function(cancel_pending_order)]
    turns = [
        [tool_call("cancel_pending_order", CANCEL, id="s1")],
        [tool_call("cancel_pending_order", CANCEL, id="s2")],
        [tool_call("cancel_pending_order", CANCEL, id="s3")],
    ]

    def before_turn(i: int) -> None:
        if i == 1:  # the first attempt finishes while the re-send waits for it
            threading.Timer(0.2, release.set).start()

    results = harness.run_turns(
        tools,
        turns,
        policy=ToolPolicy(timeout=0.1),
        thread_id=f"landing-{harness.mode}",
        before_turn=before_turn,
    )
    assert envelope(results[0]["s1"])["error"] == "unknown_outcome"
    again = results[1]["s2"]
    assert again.status == "success"  # the write the model meant was done, once
    assert "finished after all" in str(again.content)
    assert "order W1 cancelled" in str(again.content)
    assert again.response_metadata["resilience"]["served_by"] == "dedup"
    assert effects == ["W1"]
    third = envelope(results[2]["s3"])  # a repeat after that is a repeat of a done write
    assert third["error"] == "duplicate_call" and "finished after all" in third["message"]
    assert effects == ["W1"]


@pytest.mark.parametrize("kind", ["async", "async-only"])
def test_an_async_write_cancelled_at_its_timeout_runs_once_when_sent_again(
    harness: Harness, kind: str
) -> None:
    """An async write that times out is cancelled there (from sync code too, where its
    coroutine runs on a loop of ours) and never takes effect: the re-send the model makes
    after ``unknown_outcome`` runs it, once, and a repeat after that is blocked."""
    if kind == "async" and harness.mode == "sync":
        pytest.skip("a sync run calls the tool's own sync function")
    effects: list[str] = []
    hung: list[str] = []
    cancelled: list[str] = []

    async def acancel_pending_order(order_id: str, reason: str) -> str:
        """Cancel a pending order."""
        if not hung:
            hung.append(order_id)
            try:
                await asyncio.sleep(10)  # the first attempt hangs: cancelled at its timeout
            except asyncio.CancelledError:
                cancelled.append(order_id)
                raise
        effects.append(order_id)
        return f"order {order_id} cancelled"

    def cancel_pending_order(order_id: str, reason: str) -> str:
        """Cancel a pending order."""
        raise AssertionError("an async run awaits the coroutine")

    sync = cancel_pending_order if kind == "async" else None
    write = StructuredTool.from_function(
        func=sync, coroutine=acancel_pending_order, name="cancel_pending_order"
    )
    turns = [[tool_call("cancel_pending_order", CANCEL, id=f"s{i}")] for i in (1, 2, 3)]
    results = harness.run_turns(
        [Orders().tools()[0], write], turns, policy=ToolPolicy(timeout=0.1),
        thread_id=f"cancelled-{harness.mode}-{kind}",
    )  # fmt: skip
    assert envelope(results[0]["s1"])["error"] == "unknown_outcome"
    again = results[1]["s2"]
    assert again.status == "success" and "order W1 cancelled" in str(again.content)
    assert again.response_metadata.get("resilience", {}).get("served_by", "tool") == "tool"
    assert envelope(results[2]["s3"])["error"] == "duplicate_call"
    assert effects == ["W1"] and cancelled == ["W1"]  # the first attempt never took effect


async def test_a_re_sent_write_waits_for_its_timed_out_attempt_behind_a_users_wrapper() -> None:
    """The same on a node whose ``awrap_tool_call`` is the user's: LangGraph's handler
    executes the sync tool (on the pipeline's workers, `runtime.offload.OffloadedTool`),
    not the pipeline, and the attempt that timed out still runs there. The re-send waits
    for it and is answered with its result; the write ran once."""
    release, effects, wrapped = threading.Event(), [], []

    def cancel_pending_order(order_id: str, reason: str) -> str:
        """Cancel a pending order."""
        release.wait(10)
        effects.append(order_id)
        return f"order {order_id} cancelled"

    async def logged(request: Any, execute: Any) -> Any:
        wrapped.append(request.tool_call["id"])
        return await execute(request)

    node = ResilientToolNode(
        [StructuredTool.from_function(cancel_pending_order)],
        policy=ToolPolicy(timeout=0.1),
        awrap_tool_call=logged,
    )
    app = tools_graph(node, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "wrapped-landing"}}

    async def send(call_id: str) -> Any:
        ai = AIMessage("", tool_calls=[tool_call("cancel_pending_order", CANCEL, id=call_id)])
        return (await app.ainvoke({"messages": [ai]}, config))["messages"][-1]

    try:
        assert envelope(await send("s1"))["error"] == "unknown_outcome"
        asyncio.get_running_loop().call_later(0.2, release.set)
        again = await send("s2")
    finally:
        release.set()
    assert again.status == "success", again.content
    assert "order W1 cancelled" in str(again.content)
    assert again.response_metadata["resilience"]["served_by"] == "dedup"
    assert effects == ["W1"] and wrapped == ["s1"]  # the re-send never reached the tool


def test_a_read_refused_with_503_and_retry_after_says_when_to_come_back(harness: Harness) -> None:
    def get_order_details(order_id: str) -> str:
        """The status of an order."""
        raise ServiceRefused(503, retry_after=7)

    result = harness.run(
        [StructuredTool.from_function(get_order_details)],
        [tool_call("get_order_details", {"order_id": "W1"}, id="g1")],
        policy=ToolPolicy(retry=1),
    )
    data = envelope(result["g1"])
    assert data["error"] == "transient_failure" and data["retry_after_s"] == 7


def test_an_idempotent_write_is_never_named_as_the_check() -> None:
    """Only reads are checks: a write that is safe to repeat (its service honours keys)
    still changes things, so it is not what the model is told to check with."""
    from langchain_core.messages import AIMessage

    from langchain_resilient_tools import ResilientToolNode

    orders = Orders()
    orders.plan = [("before", ConnectionResetError(104, "Connection reset by peer"))]

    def archive_order(order_id: str) -> str:
        """Archive an order (a keyed write: safe to repeat)."""
        return "archived"

    tools = [*orders.tools(), StructuredTool.from_function(archive_order)]
    node = ResilientToolNode(tools, policies={"archive_order": ToolPolicy(idempotency_key=True)})
    graph = tools_graph(node)
    ai = AIMessage("", tool_calls=[tool_call("cancel_pending_order", CANCEL, id="k1")])
    out = graph.invoke({"messages": [ai]}, {"configurable": {"thread_id": "keyed"}})
    data = envelope(out["messages"][-1])
    assert data["check"] == {"tool": "get_order_details", "args": {"order_id": "W1"}}


def _named(name: str, base: type[BaseException] = Exception, **attrs: Any) -> BaseException:
    """An exception of a class named as a client library names it (matched by name)."""
    exc = type(name, (base,), {})("x")
    for key, value in attrs.items():
        setattr(exc, key, value)
    return exc


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ConnectionRefusedError(111, "refused"), True),
        (socket.gaierror(-2, "Name or service not known"), True),
        (OSError(101, "Network is unreachable"), True),
        (_named("ConnectTimeout"), True),  # httpx, requests
        (_named("ConnectError"), True),  # httpx
        (_named("MaxRetryError", reason=_named("NewConnectionError")), True),  # urllib3
        (_named("ClientConnectorError", OSError), True),  # aiohttp
        (_chained(ConnectionError("Max retries"), ConnectionRefusedError()), True),  # requests
        (ServiceRefused(429), True),
        (ServiceRefused(503, retry_after=2), True),
        (ConnectionResetError(104, "reset"), False),
        (_chained(ConnectionError("aborted"), ConnectionResetError()), False),
        (_named("ReadTimeout"), False),
        (_named("ServerTimeoutError", OSError), False),  # aiohttp: a read timeout
        (TimeoutError(), False),
        (_named("HTTPError", status_code=500), False),
        (_named("HTTPError", status_code=503), False),  # no Retry-After: maybe half done
    ],
    ids=lambda v: v if isinstance(v, bool) else type(v).__name__,
)
def test_what_says_a_request_was_not_carried_out(exc: BaseException, expected: bool) -> None:
    from langchain_resilient_tools.core.hints import not_carried_out

    assert not_carried_out(exc) is expected


def test_the_check_after_an_unknown_outcome_reads_the_truth(harness: Harness) -> None:
    """The reply was lost after the write took effect: the check the model runs must not
    be answered from a read made before the write."""
    orders = Orders()
    orders.plan = [("after", ConnectionResetError(104, "Connection reset by peer"))]
    read = {"order_id": "W1"}
    turns = [
        [tool_call("get_order_details", read, id="u1")],
        [tool_call("cancel_pending_order", CANCEL, id="u2")],
        [tool_call("get_order_details", read, id="u3")],
    ]
    results = harness.run_turns(orders.tools(), turns, thread_id=f"truth-{harness.mode}")
    assert envelope(results[1]["u2"])["error"] == "unknown_outcome"
    assert json.loads(results[2]["u3"].content)["status"] == "cancelled"


@pytest.mark.parametrize(
    ("write", "args", "reads", "expected"),
    [
        (
            "cancel_pending_order",
            CANCEL,
            ["get_order_details", "get_user_details"],
            "get_order_details",
        ),
        (
            "log_verification",
            {"user_id": "u"},
            ["get_all_user_accounts_by_user_id_3847", "get_verification_history"],
            "get_verification_history",
        ),
        (
            "submit_cash_back_dispute_0589",
            {"user_id": "u", "transaction_id": "t"},
            ["get_all_user_accounts_by_user_id_3847", "get_cash_back_disputes"],
            "get_cash_back_disputes",
        ),
        (
            "open_bank_account_4821",
            {"user_id": "u"},
            ["get_all_user_accounts_by_user_id_3847", "get_bank_account_details"],
            "get_bank_account_details",
        ),
        # the same ids, but about something else: it cannot show the write
        ("enable_roaming", {"customer_id": "c", "line_id": "l"}, ["get_data_usage"], None),
    ],
)
def test_the_check_is_a_read_about_what_the_write_changes(
    write: str, args: dict[str, Any], reads: list[str], expected: str | None
) -> None:
    from langchain_resilient_tools.pipeline.lookups import Read, nouns, pick

    found = pick(
        tuple(Read(r, frozenset(args), frozenset(args), nouns(r)) for r in reads),
        args,
        nouns(write),
    )
    assert (found or {}).get("tool") == expected


def test_a_declared_check_is_the_one_named(harness: Harness) -> None:
    """`UnknownOutcome(check=...)` names the read the user knows shows the write, with the
    write's values for its parameters (a wrapped tool, which knows no sibling, names it
    without arguments)."""
    orders = Orders()
    orders.plan = [("after", ConnectionResetError(104, "Connection reset by peer"))]
    policy = ToolPolicy(unknown_outcome=UnknownOutcome(check="get_order_details"))
    result = harness.run(
        orders.tools(),
        [tool_call("cancel_pending_order", CANCEL, id="d1")],
        policies={"cancel_pending_order": policy},
        config={"configurable": {"thread_id": f"declared-{harness.mode}"}},
    )
    check = envelope(result["d1"])["check"]
    assert check["tool"] == "get_order_details"
    assert check["args"] == ({} if harness.adapter == "tool" else {"order_id": "W1"})
