"""`text.classify`: every exception the stages raise, and every kind a tool raises, as
the model is told it. The envelopes are pinned byte for byte in
``tests/classify_envelopes.json`` (written from the code before `classify` became a
table; a change to a message is a change to that file, made on purpose)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field, ValidationError

from langchain_resilient_tools import Output, ToolPolicy
from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.core.errors import (
    AttemptTimeout,
    CircuitOpen,
    Drained,
    DuplicateCall,
    HandledByTool,
    InvalidArguments,
    JournalUnreadable,
    LeftUnanswered,
    LowQualityResult,
    MalformedCall,
    NotRun,
    OrphanedWrite,
    OutcomeStillUnknown,
    Recorded,
    ReportedError,
    RerunUnconfirmed,
    SessionUnavailable,
    StateUnavailable,
    Superseded,
    ThreadsExhausted,
    ToolErrorType,
    ToolRaised,
    UnknownTool,
    WriteInFlight,
)
from langchain_resilient_tools.core.policy import PolicyResolver
from langchain_resilient_tools.pipeline.driver import Pipeline
from langchain_resilient_tools.testing.faults import ServiceRefused
from langchain_resilient_tools.text.classify import (
    classify,
    error_type,
    is_unknown_outcome,
    rule_for,
)
from langchain_resilient_tools.text.envelope import envelope
from langchain_resilient_tools.text.rules import SIGNALS
from langchain_resilient_tools.text.tool_rules import TOOL_ERRORS

GOLDEN = Path(__file__).with_name("classify_envelopes.json")


class Order(BaseModel):
    item: str
    quantity: int = Field(ge=1)


def create_order(item: str, quantity: int = 1) -> str:
    return f"ordered {quantity} {item}"


def _order_tool() -> BaseTool:
    return StructuredTool.from_function(
        create_order, name="create_order", description="Order an item.", args_schema=Order
    )


def _validation_error() -> ValidationError:
    try:
        Order.model_validate({"item": "pen", "quantity": 0})
    except ValidationError as exc:
        return exc
    raise AssertionError("not reached")


def _wrapped_refusal() -> BaseException:
    """A client's connection error that wraps a refused connection (never sent)."""
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as inner:
            raise ConnectionError("could not reach the service") from inner
    except ConnectionError as outer:
        return outer


class RetryableFlag(Exception):
    retryable = True


@dataclass(frozen=True)
class Case:
    id: str
    exc: Callable[[], BaseException]
    name: str = "get_weather"
    args: dict[str, Any] = field(default_factory=lambda: {"city": "Paris"})
    policy: ToolPolicy | None = None
    tool: Callable[[], BaseTool] | None = None
    dropped: tuple[str, ...] = ()


_FIELDS = [{"name": "city", "problem": "missing", "message": "'city' is required."}]
_RECEIPT = {
    "error": "unknown_outcome", "message": "create_order may have run.",
    "suggestion": "Check first.", "retryable": False, "extra": {"check": {"tool": "get_x"}},
}  # fmt: skip

CASES = [
    Case("timeout-read", lambda: AttemptTimeout(5.0)),
    Case("timeout-write-not-started", lambda: AttemptTimeout(5.0, started=False), "create_order"),
    Case("timeout-write-started", lambda: AttemptTimeout(2.5), "create_order"),
    Case("threads-exhausted", lambda: ThreadsExhausted(3)),
    Case("unknown-tool-close", lambda: UnknownTool("get_wether", ["get_weather", "search"])),
    Case("unknown-tool-none", lambda: UnknownTool("zzz", [])),
    Case("unknown-tool-secret", lambda: UnknownTool("sk-abcdefghijklmnopqrstuvwx", ["a"])),
    Case("malformed", lambda: MalformedCall("unterminated string at char 12")),
    Case("malformed-with-tool", lambda: MalformedCall("bad json"), tool=_order_tool),
    Case("invalid-args", lambda: InvalidArguments(_FIELDS)),
    Case("invalid-args-summary", lambda: InvalidArguments(_FIELDS, summary="Nothing fits.")),
    Case("invalid-args-dropped", lambda: InvalidArguments(_FIELDS), dropped=("town", "x")),
    Case("invalid-args-tool", lambda: InvalidArguments(_FIELDS), "create_order", tool=_order_tool),
    Case("circuit-open", lambda: CircuitOpen(12.345)),
    Case("drained", lambda: Drained("write"), "create_order"),
    Case("drained-after-read", lambda: Drained("retry", after=ToolRaised(ConnectionError("x")))),
    Case(
        "drained-after-write",
        lambda: Drained("retry", after=ToolRaised(TimeoutError("slow"))),
        "create_order",
    ),
    Case("drained-after-signal", lambda: Drained("probe", after=CircuitOpen(3.0))),
    Case("state-unavailable", lambda: StateUnavailable()),
    Case("session-blocked", lambda: SessionUnavailable("blocked")),
    Case("session-closed", lambda: SessionUnavailable("closed")),
    Case("recorded", lambda: Recorded(_RECEIPT), "create_order"),
    Case("recorded-unknown-type", lambda: Recorded({"error": "nonsense", "message": 3})),
    Case("rerun-unconfirmed", lambda: RerunUnconfirmed("ConnectionError"), "create_order"),
    Case("orphaned-write", lambda: OrphanedWrite(seconds_ago=95.0), "create_order"),
    Case("write-in-flight", lambda: WriteInFlight("in flight"), "create_order"),
    Case("journal-unreadable", lambda: JournalUnreadable(), "create_order"),
    Case("left-unanswered", lambda: LeftUnanswered(), "create_order"),
    Case("not-run-write", lambda: NotRun(reads=False), "create_order"),
    Case("not-run-read", lambda: NotRun(reads=True)),
    Case("outcome-still-unknown", lambda: OutcomeStillUnknown("?"), "create_order"),
    Case("duplicate-done", lambda: DuplicateCall(previous="sunny", repeats=2, age=61.0)),
    Case("duplicate-looping", lambda: DuplicateCall(previous=None, repeats=4, looping=True)),
    Case(
        "duplicate-in-flight",
        lambda: DuplicateCall(previous=None, repeats=1, reason="in_flight"),
        "create_order",
    ),
    Case(
        "duplicate-unknown",
        lambda: DuplicateCall(previous=None, repeats=1, reason="unknown_outcome", age=0.2),
        "create_order",
    ),
    Case(
        "duplicate-landed",
        lambda: DuplicateCall(previous="ok", repeats=1, reason="landed", looping=True),
        "create_order",
    ),
    Case("low-quality", lambda: LowQualityResult("empty result", preview="[]")),
    Case(
        "tool-validation", lambda: ToolRaised(_validation_error()), "create_order", tool=_order_tool
    ),
    Case("tool-rate-limited", lambda: ToolRaised(ServiceRefused(429, 2.25))),
    Case("tool-rate-limited-write", lambda: ToolRaised(ServiceRefused(429, 1.0)), "create_order"),
    Case("tool-rate-limited-no-wait", lambda: ToolRaised(_named("RateLimitError")("slow down"))),
    Case("tool-refused-read", lambda: ToolRaised(ConnectionRefusedError(111, "refused"))),
    Case(
        "tool-refused-write",
        lambda: ToolRaised(ConnectionRefusedError(111, "refused")),
        "create_order",
    ),
    Case("tool-never-sent-write", lambda: ToolRaised(_wrapped_refusal()), "create_order"),
    Case("tool-dns-write", lambda: ToolRaised(socket.gaierror(-2, "no name")), "create_order"),
    Case("tool-503-write", lambda: ToolRaised(ServiceRefused(503, 4.0)), "create_order"),
    Case("tool-503-read", lambda: ToolRaised(ServiceRefused(503, 4.0))),
    Case("tool-transient-read", lambda: ToolRaised(ConnectionResetError(104, "reset"))),
    Case(
        "tool-transient-write", lambda: ToolRaised(TimeoutError("read timed out")), "create_order"
    ),
    Case("tool-retryable-flag-write", lambda: ToolRaised(RetryableFlag("again")), "create_order"),
    Case("tool-500-read", lambda: ToolRaised(ServiceRefused(500, 1.0, "500 oops"))),
    Case(
        "tool-exception-text",
        lambda: ToolRaised(ToolException("no file /srv/app/x.py password=hunter2 for Paris")),
    ),
    Case("tool-value-error", lambda: ToolRaised(ValueError("city 'Paris' unknown"))),
    Case("tool-lookup-error", lambda: ToolRaised(KeyError("Paris"))),
    Case("tool-empty-text", lambda: ToolRaised(ValueError(""))),
    Case("tool-file-not-found", lambda: ToolRaised(FileNotFoundError(2, "No such file", "/x"))),
    Case("tool-opaque", lambda: ToolRaised(RuntimeError("db at 10.0.0.3 said no"))),
    Case(
        "tool-exposed",
        lambda: ToolRaised(RuntimeError("db said no, token=abc123def456")),
        policy=ToolPolicy(output=Output(expose_error_details=True)),
    ),
    Case(
        "tool-reported",
        lambda: ToolRaised(ReportedError("Error: /data/a.txt is outside /data/allowed")),
    ),
    Case(
        "tool-handled",
        lambda: ToolRaised(
            HandledByTool("Error: bad city", ToolMessage("Error: bad city", tool_call_id="c1"))
        ),
    ),
    Case("internal", lambda: RuntimeError("a bug in the layer")),
    Case("internal-superseded", lambda: Superseded()),
]


def _named(name: str) -> type[Exception]:
    return type(name, (Exception,), {})


def _call(case: Case) -> Call:
    pipeline = Pipeline(PolicyResolver(case.policy))
    tool = case.tool() if case.tool else None
    call = pipeline.new_call(call_id="c1", name=case.name, args=dict(case.args), tool=tool)
    call.dropped = case.dropped
    return call


def _said(case: Case) -> dict[str, Any]:
    exc = case.exc()
    call = _call(case)
    failure = classify(exc, call)
    cause = failure.cause
    return {
        "envelope": json.dumps(envelope(failure, call)),
        "cause": None if cause is None else type(cause).__name__,
    }


def written() -> dict[str, Any]:
    """What every case says today (to rewrite the golden file on purpose:
    ``python -c 'import tests.test_classify as t; t.write()'``)."""
    return {case.id: _said(case) for case in CASES}


def write() -> None:
    GOLDEN.write_text(json.dumps(written(), indent=1, ensure_ascii=False) + "\n")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_envelope_is_as_pinned(case: Case) -> None:
    assert _said(case) == json.loads(GOLDEN.read_text())[case.id]


def test_every_pinned_envelope_has_its_case() -> None:
    assert set(json.loads(GOLDEN.read_text())) == {c.id for c in CASES}


def _row(case: Case) -> tuple[str, int] | None:
    """Which row of which table classifies the case (`None`: a signal that wraps another
    failure, `Recorded` or a `Drained` after a failure)."""
    exc = case.exc()
    if isinstance(exc, Recorded) or (isinstance(exc, Drained) and exc.after is not None):
        return None
    table = "tool" if isinstance(exc, ToolRaised) else "signal"
    rule = rule_for(exc, _call(case))[1]
    rows = TOOL_ERRORS if table == "tool" else SIGNALS
    return table, next(i for i, r in enumerate(rows) if r is rule)


def test_every_row_of_both_tables_classifies_a_case() -> None:
    hit = {_row(case) for case in CASES}
    every = {("signal", i) for i in range(len(SIGNALS))}
    every |= {("tool", i) for i in range(len(TOOL_ERRORS))}
    assert every - hit == set(), "rows no case reaches"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_type_alone_is_the_type_of_the_envelope(case: Case) -> None:
    """`error_type` and `is_unknown_outcome` answer without writing the envelope, and
    say what `classify` says."""
    call = _call(case)
    failure = classify(case.exc(), call)
    assert error_type(case.exc(), call) is failure.error
    assert is_unknown_outcome(case.exc(), call) is (failure.error is ToolErrorType.UNKNOWN_OUTCOME)


def test_the_row_of_a_signal_is_its_first_match() -> None:
    """A subclass's row comes before its base's: `OrphanedWrite` is an
    `OutcomeStillUnknown`, and says more."""
    call = _call(Case("x", lambda: LeftUnanswered(), "create_order"))
    orphaned = rule_for(OrphanedWrite(seconds_ago=1.0), call)[1]
    assert orphaned.signal is OrphanedWrite
    assert rule_for(OutcomeStillUnknown("?"), call)[1].signal is OutcomeStillUnknown
